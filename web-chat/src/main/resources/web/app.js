// The chat page: conversations in the sidebar, the messages of the current one, the composer,
// and the settings dialog. One generation runs at a time; its answer streams into its message.

import { ApiError, fetchModel, streamChat } from './api.js';
import { renderMarkdown } from './markdown.js';
import { ConversationStore, displayTitle } from './store.js';
import { DEFAULTS, chosen, loadSettings, saveSettings } from './settings.js';

const $ = id => document.getElementById(id);
const els = {
  app: $('app'),
  scrim: $('scrim'),
  conversations: $('conversations'),
  title: $('conversation-title'),
  messages: $('messages'),
  empty: $('empty'),
  composer: $('composer'),
  prompt: $('prompt'),
  send: $('send'),
  stop: $('stop'),
  thinkingToggle: $('thinking-toggle'),
  model: $('model'),
  modelDot: $('model-dot'),
  modelName: $('model-name'),
  modelFacts: $('model-facts'),
  demoBanner: $('demo-banner'),
  demoBannerClose: $('demo-banner-close'),
  serverBanner: $('server-banner'),
  toBottom: $('to-bottom'),
  settings: $('settings'),
};

const store = new ConversationStore();
let settings = loadSettings();
let model = null;             // the served model from /v1/models, once known
let modelCheck = null;        // the timer of the next look at /v1/models
/** How often the page looks at the server again, so that the pill tells when it went away or came back. */
const MODEL_CHECK_MS = 5000;
/** localStorage: the demo banner was dismissed. */
const DEMO_BANNER_DISMISSED = 'glimmer.demoBannerDismissed';
/** The generation in progress: {conversation, message, controller}, or null. */
let active = null;
/** Each shown message's element, so that streaming updates touch only that one. */
let shown = new WeakMap();

// ---------------------------------------------------------------- formatting

function latency(ms) {
  return ms < 1000 ? Math.round(ms) + ' ms' : seconds(ms);
}

function seconds(ms) {
  return ms < 10_000 ? (ms / 1000).toFixed(1) + ' s' : Math.round(ms / 1000) + ' s';
}

function compact(n) {
  if (n >= 1e9) return (n / 1e9).toFixed(n >= 1e10 ? 0 : 1) + 'B';
  if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1) + 'M';
  if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 0 : 1) + 'k';
  return String(n);
}

function element(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function iconButton(className, title, path) {
  const b = element('button', 'action ' + className);
  b.type = 'button';
  b.title = title;
  b.setAttribute('aria-label', title);
  b.innerHTML = `<svg viewBox="0 0 24 24" aria-hidden="true">${path}</svg>`;
  return b;
}

const ICONS = {
  copy: '<rect x="9" y="9" width="11" height="11" rx="2"/><path d="M5 15V5a1 1 0 0 1 1-1h10"/>',
  regenerate: '<path d="M20 11a8 8 0 1 0-2.3 5.7M20 5v6h-6"/>',
  edit: '<path d="M4 20h4L19 9l-4-4L4 16v4zM14 6l4 4"/>',
  rename: '<path d="M4 20h4L19 9l-4-4L4 16v4z"/>',
  delete: '<path d="M5 7h14M10 7V4h4v3M7 7l1 13h8l1-13"/>',
};

// ---------------------------------------------------------------- the model

async function loadModel() {
  clearTimeout(modelCheck);
  try {
    const served = await fetchModel(settings.apiKey);
    const changed = !model || model.id !== served.id;
    model = served;
    const meta = model.meta ?? {};
    els.modelName.textContent = model.id;
    const facts = [];
    if (meta.n_params) facts.push(compact(meta.n_params) + ' params');
    if (meta.quant) facts.push(meta.quant);
    if (meta.n_ctx) facts.push(meta.n_ctx.toLocaleString('en-US') + ' context');
    els.modelFacts.textContent = facts.join(' · ');
    els.model.title = [model.id, ...facts].join('\n');
    els.modelDot.className = 'model-dot ok';
    els.model.classList.remove('needs-key');
    els.demoBanner.hidden = !meta.demo || localStorage.getItem(DEMO_BANNER_DISMISSED) === '1';
    // Random weights never close a thought: on the demo model thinking starts off, unless the user turned it on.
    if (changed && meta.demo && !chosen('thinking')) {
      settings.thinking = false;
      els.thinkingToggle.checked = false;
    }
    els.serverBanner.hidden = true;
    // Look again later: a server that went away turns the pill to offline.
    modelCheck = setTimeout(loadModel, MODEL_CHECK_MS);
  } catch (e) {
    model = null;
    // Up but wanting a key is not offline: the pill says what to do, without the red of a dead server.
    const state = e.status === 401 ? 'locked' : e.status === 503 ? 'loading' : 'down';
    els.modelDot.className = 'model-dot ' + state;
    els.model.classList.toggle('needs-key', state === 'locked');
    els.modelName.textContent = { locked: 'API key needed', loading: 'loading…', down: 'offline' }[state];
    els.model.title = state === 'locked' ? 'The server wants an API key: set it in Settings' : '';
    els.modelFacts.textContent = '';
    showServerProblem(e.status === 503 ? 'The model is loading: ' + e.message : errorText(e));
    // The server may be starting, loading, gone, or waiting for a key: look again shortly.
    modelCheck = setTimeout(loadModel, state === 'locked' ? MODEL_CHECK_MS : 3000);
  }
}

function showServerProblem(text) {
  els.serverBanner.textContent = text;
  els.serverBanner.hidden = false;
}

function errorText(e) {
  const text = e instanceof ApiError ? e.message : String(e.message ?? e);
  return text.charAt(0).toUpperCase() + text.slice(1);
}

// ---------------------------------------------------------------- the sidebar

function renderSidebar() {
  els.conversations.replaceChildren();
  for (const c of store.list()) {
    const item = element('div', 'conversation' + (c.id === store.currentId ? ' current' : ''));
    item.dataset.id = c.id;
    const open = element('button', 'conversation-open', displayTitle(c));
    open.type = 'button';
    open.title = displayTitle(c);
    open.addEventListener('click', () => switchTo(c.id));
    const rename = iconButton('rename', 'Rename', ICONS.rename);
    rename.addEventListener('click', () => startRename(item, c));
    const remove = iconButton('delete', 'Delete', ICONS.delete);
    remove.addEventListener('click', () => deleteConversation(c));
    item.append(open, rename, remove);
    els.conversations.append(item);
  }
}

function startRename(item, conversation) {
  const input = element('input', 'rename-input');
  input.value = displayTitle(conversation);
  input.setAttribute('aria-label', 'Conversation name');
  item.replaceChildren(input);
  input.focus();
  input.select();
  let finished = false;
  const finish = save => {
    if (finished) return;
    finished = true;
    if (save && input.value.trim()) store.rename(conversation.id, input.value);
    renderSidebar();
    if (conversation.id === store.currentId) els.title.textContent = displayTitle(conversation);
  };
  input.addEventListener('keydown', e => {
    if (e.key === 'Enter') finish(true);
    if (e.key === 'Escape') finish(false);
  });
  input.addEventListener('blur', () => finish(true));
}

function deleteConversation(conversation) {
  if (conversation.messages.length && !confirm(`Delete “${displayTitle(conversation)}”?`)) return;
  if (active?.conversation === conversation) active.controller.abort();
  store.delete(conversation.id);
  renderAll();
}

function switchTo(id) {
  store.select(id);
  closeSidebar();
  renderAll();
}

function newChat() {
  const current = store.current();
  // An empty conversation is reused rather than piling up empty ones.
  if (!current || current.messages.length) store.create();
  closeSidebar();
  renderAll();
  els.prompt.focus();
}

function openSidebar() {
  els.app.classList.add('sidebar-open');
}

function closeSidebar() {
  els.app.classList.remove('sidebar-open');
}

// ---------------------------------------------------------------- the messages

function renderAll() {
  renderSidebar();
  renderConversation();
  updateComposer();
}

function renderConversation() {
  const conversation = store.current();
  shown = new WeakMap();
  els.title.textContent = conversation ? displayTitle(conversation) : 'New chat';
  document.title = conversation && conversation.messages.length ? displayTitle(conversation) + ' · Glimmer' : 'Glimmer';
  const messages = conversation?.messages ?? [];
  els.messages.replaceChildren();
  els.toBottom.hidden = true;
  if (!messages.length) {
    els.messages.append(els.empty);
    return;
  }
  messages.forEach((m, i) => {
    const e = m.role === 'user' ? userMessage(conversation, m, i) : assistantMessage(conversation, m, i);
    shown.set(m, e);
    els.messages.append(e);
  });
  scrollToBottom();
}

function isLast(conversation, index, role) {
  for (let i = conversation.messages.length - 1; i >= 0; i--) {
    if (conversation.messages[i].role === role) return i === index;
  }
  return false;
}

function userMessage(conversation, message, index) {
  const article = element('article', 'message user');
  const bubble = element('div', 'bubble', message.content);
  article.append(bubble);
  if (isLast(conversation, index, 'user') && !active) {
    const actions = element('div', 'message-actions');
    const edit = iconButton('edit', 'Edit and resend', ICONS.edit);
    edit.addEventListener('click', () => startEdit(article, conversation, message, index));
    actions.append(edit);
    article.append(actions);
  }
  return article;
}

function startEdit(article, conversation, message, index) {
  const editor = element('div', 'editor');
  const text = element('textarea', 'edit-text');
  text.value = message.content;
  text.rows = Math.min(12, message.content.split('\n').length + 1);
  const row = element('div', 'editor-actions');
  const cancel = element('button', 'secondary', 'Cancel');
  cancel.type = 'button';
  const save = element('button', 'primary', 'Send');
  save.type = 'button';
  row.append(cancel, save);
  editor.append(text, row);
  article.replaceChildren(editor);
  text.focus();
  text.setSelectionRange(text.value.length, text.value.length);
  const submit = () => {
    const content = text.value.trim();
    if (!content || active) return;
    message.content = content;
    conversation.messages.length = index + 1;   // what followed the old message answered the old message
    store.touch(conversation);
    generate(conversation);
  };
  cancel.addEventListener('click', renderConversation);
  save.addEventListener('click', submit);
  text.addEventListener('keydown', e => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      submit();
    }
    if (e.key === 'Escape') renderConversation();
  });
}

function assistantMessage(conversation, message, index) {
  const article = element('article', 'message assistant');
  const thinking = element('details', 'thinking');
  const summary = element('summary');
  summary.append(element('span', 'thinking-label'), element('span', 'thinking-chevron'));
  thinking.append(summary, element('div', 'thinking-body markdown'));
  // Once the user opens or closes it, it stays that way while the answer streams.
  summary.addEventListener('click', () => { message.thinkingToggled = true; });
  const answer = element('div', 'answer markdown');
  const status = element('div', 'status');
  const stats = element('footer', 'stats');
  const actions = element('div', 'message-actions');
  article.append(thinking, answer, status, stats, actions);
  updateAssistant(article, conversation, message, index);
  return article;
}

/** Brings a shown assistant message up to date with its data. */
function updateAssistant(article, conversation, message, index) {
  const [thinking, answer, status, stats, actions] = article.children;
  const streaming = !!message.pending;
  const answering = message.content.length > 0;

  // Thinking: open while the model reasons, folded once the answer starts, with its duration.
  thinking.hidden = !message.reasoning;
  if (message.reasoning) {
    const label = thinking.querySelector('.thinking-label');
    const stillThinking = streaming && !answering;
    label.textContent = stillThinking ? 'Thinking…' : `Thought for ${seconds(message.thinkingMs ?? 0)}`;
    thinking.classList.toggle('live', stillThinking);
    if (!message.thinkingToggled) thinking.open = stillThinking;
    renderMarkdown(thinking.querySelector('.thinking-body'), message.reasoning);
  }

  if (answering) renderMarkdown(answer, message.content); else answer.replaceChildren();
  answer.classList.toggle('streaming', streaming && answering);
  answer.hidden = !answering;

  status.replaceChildren();
  status.className = 'status';
  if (streaming && !message.reasoning && !answering) {
    status.classList.add('waiting');
    status.append(element('span', 'dots'), document.createTextNode(message.sent ? 'Reading the prompt…' : 'Sending…'));
  } else if (message.error) {
    status.classList.add('error');
    status.append(element('span', 'status-icon', '!'), element('span', 'status-text', message.error));
  } else if (message.stopped) {
    status.classList.add('stopped');
    status.textContent = 'Stopped';
  } else if (message.finishReason === 'length') {
    status.classList.add('note');
    status.textContent = message.contextFull
      ? 'Cut off: the context is full. Start a new chat to go on.'
      : answering && message.serverCap
        ? `Cut off at the demo server's limit of ${message.serverCap} tokens per answer.`
      : answering ? 'Cut off at the max tokens limit (Settings).'
        : 'The model used every token thinking and gave no answer: raise max tokens or turn thinking off.';
  }
  status.hidden = !status.childNodes.length;

  stats.replaceChildren();
  const s = message.stats;
  if (s && !streaming) {
    const parts = [];
    if (s.completionTokens != null) parts.push(['tokens', `${s.completionTokens} tokens`]);
    if (s.tokensPerSecond != null) parts.push(['speed', `${s.tokensPerSecond.toFixed(1)} tok/s`]);
    if (s.ttftMs != null) parts.push(['ttft', `${latency(s.ttftMs)} to first token`]);
    if (s.cachedTokens != null) parts.push(['cached', `${s.cachedTokens} of ${s.promptTokens} prompt tokens cached`]);
    for (const [kind, text] of parts) stats.append(element('span', 'stat stat-' + kind, text));
  }
  stats.hidden = !stats.childNodes.length;

  actions.replaceChildren();
  if (!streaming) {
    if (answering) {
      const copy = iconButton('copy', 'Copy the answer', ICONS.copy);
      copy.addEventListener('click', () => copyText(message.content, copy));
      actions.append(copy);
    }
    if (isLast(conversation, index, 'assistant') && index === conversation.messages.length - 1 && !active) {
      const again = iconButton('regenerate', 'Regenerate', ICONS.regenerate);
      again.addEventListener('click', () => regenerate(conversation));
      actions.append(again);
    }
  }
  actions.hidden = !actions.childNodes.length;
  article.classList.toggle('pending', streaming);
}

/** Redraws a message at most once per frame while tokens arrive. */
const scheduled = new Set();
function scheduleUpdate(conversation, message) {
  if (scheduled.has(message)) return;
  scheduled.add(message);
  requestAnimationFrame(() => {
    scheduled.delete(message);
    refresh(conversation, message);
  });
}

function refresh(conversation, message) {
  const article = shown.get(message);
  if (!article || conversation !== store.current()) return;
  const stick = nearBottom();
  updateAssistant(article, conversation, message, conversation.messages.indexOf(message));
  if (stick) scrollToBottom(); else els.toBottom.hidden = false;
}

function nearBottom() {
  const m = els.messages;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
}

function scrollToBottom() {
  els.messages.scrollTop = els.messages.scrollHeight;
  els.toBottom.hidden = true;
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No clipboard API (a page not served from localhost or https): the old way.
    const area = element('textarea');
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand('copy');
    area.remove();
  }
  button.classList.add('copied');
  const label = button.textContent;
  if (button.classList.contains('copy-code')) button.textContent = 'Copied';
  setTimeout(() => {
    button.classList.remove('copied');
    if (button.classList.contains('copy-code')) button.textContent = label;
  }, 1500);
}

// ---------------------------------------------------------------- generating

function requestFor(conversation) {
  const messages = [];
  if (settings.systemPrompt.trim()) messages.push({ role: 'system', content: settings.systemPrompt.trim() });
  for (const m of conversation.messages) {
    if (m.role === 'user') messages.push({ role: 'user', content: m.content });
    // A failed or empty answer is left out: the model never said it.
    else if (m.role === 'assistant' && !m.pending && m.content) messages.push({ role: 'assistant', content: m.content });
  }
  const request = {
    messages,
    temperature: settings.temperature,
    top_p: settings.topP,
    chat_template_kwargs: { enable_thinking: settings.thinking },
  };
  if (model) request.model = model.id;
  if (settings.maxTokens) request.max_tokens = settings.maxTokens;
  return request;
}

async function generate(conversation) {
  const message = { role: 'assistant', content: '', reasoning: '', pending: true };
  conversation.messages.push(message);
  store.touch(conversation);
  const controller = new AbortController();
  active = { conversation, message, controller };
  renderAll();

  const started = performance.now();
  let firstToken = null;
  let reasoningStarted = null;
  let streamedTokens = 0;
  try {
    const request = requestFor(conversation);
    // Without a max_tokens of the page's, the server's own cap for an answer applies (the demo model has one).
    const serverCap = request.max_tokens == null ? model?.meta?.default_max_tokens ?? null : null;
    const result = await streamChat(request, {
      apiKey: settings.apiKey,
      signal: controller.signal,
      onChunk: delta => {
        message.sent = true;
        const now = performance.now();
        if (delta.reasoning_content) {
          firstToken ??= now;
          reasoningStarted ??= now;
          message.reasoning += delta.reasoning_content;
          message.thinkingMs = now - reasoningStarted;
          streamedTokens++;
        }
        if (delta.content) {
          firstToken ??= now;
          message.content += delta.content;
          streamedTokens++;
        }
        scheduleUpdate(conversation, message);
      },
    });
    message.finishReason = result.finishReason;
    if (result.finishReason === 'length' && serverCap) message.serverCap = serverCap;
    const usage = result.usage ?? {};
    const timings = result.timings ?? {};
    message.stats = {
      completionTokens: usage.completion_tokens ?? streamedTokens,
      promptTokens: usage.prompt_tokens ?? null,
      cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? timings.cache_n ?? null,
      tokensPerSecond: timings.predicted_per_second ?? null,
      ttftMs: firstToken != null ? firstToken - started : null,
    };
    const ctx = model?.meta?.n_ctx;
    message.contextFull = result.finishReason === 'length' && !!ctx && usage.total_tokens >= ctx;
  } catch (e) {
    if (e.name === 'AbortError') {
      message.stopped = true;
      message.stats = { completionTokens: streamedTokens, ttftMs: firstToken != null ? firstToken - started : null };
    } else {
      message.error = errorText(e);
      if (e.status === 401) showServerProblem(message.error);
    }
  } finally {
    delete message.pending;
    active = null;
    store.touch(conversation);
    if (conversation === store.current()) renderConversation();
    renderSidebar();
    updateComposer();
  }
}

function send() {
  const content = els.prompt.value.trim();
  if (!content || active) return;
  const conversation = store.current() ?? store.create();
  conversation.messages.push({ role: 'user', content });
  els.prompt.value = '';
  autosize();
  generate(conversation);
}

function regenerate(conversation) {
  if (active) return;
  const last = conversation.messages.at(-1);
  if (last?.role === 'assistant') conversation.messages.pop();
  generate(conversation);
}

function stop() {
  active?.controller.abort();
}

function updateComposer() {
  const busy = !!active;
  els.send.hidden = busy;
  els.stop.hidden = !busy;
  els.send.disabled = !els.prompt.value.trim();
  els.composer.classList.toggle('busy', busy);
}

function autosize() {
  els.prompt.style.height = 'auto';
  els.prompt.style.height = Math.min(els.prompt.scrollHeight, window.innerHeight * 0.4) + 'px';
  updateComposer();
}

// ---------------------------------------------------------------- settings

function openSettings() {
  $('set-system').value = settings.systemPrompt;
  $('set-temperature').value = settings.temperature;
  $('set-top-p').value = settings.topP;
  $('set-max-tokens').value = settings.maxTokens ?? '';
  $('set-thinking').checked = settings.thinking;
  $('set-api-key').value = settings.apiKey;
  showRangeValues();
  els.settings.showModal();
}

function showRangeValues() {
  $('out-temperature').textContent = Number($('set-temperature').value).toFixed(2);
  $('out-top-p').textContent = Number($('set-top-p').value).toFixed(2);
}

function saveSettingsFromDialog() {
  const maxTokens = parseInt($('set-max-tokens').value, 10);
  const keyChanged = settings.apiKey !== $('set-api-key').value.trim();
  settings = {
    systemPrompt: $('set-system').value,
    temperature: Number($('set-temperature').value),
    topP: Number($('set-top-p').value),
    maxTokens: maxTokens > 0 ? maxTokens : null,
    thinking: $('set-thinking').checked,
    apiKey: $('set-api-key').value.trim(),
  };
  saveSettings(settings);
  els.thinkingToggle.checked = settings.thinking;
  if (keyChanged || !model) loadModel();
}

function resetSettingsDialog() {
  $('set-system').value = DEFAULTS.systemPrompt;
  $('set-temperature').value = DEFAULTS.temperature;
  $('set-top-p').value = DEFAULTS.topP;
  $('set-max-tokens').value = '';
  $('set-thinking').checked = DEFAULTS.thinking;
  showRangeValues();
}

// ---------------------------------------------------------------- wiring

els.composer.addEventListener('submit', e => {
  e.preventDefault();
  send();
});
els.prompt.addEventListener('keydown', e => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
});
els.prompt.addEventListener('input', autosize);
els.messages.addEventListener('scroll', () => { els.toBottom.hidden = nearBottom(); }, { passive: true });
// A reader at the end of the conversation stays there when the window changes size (a phone turned).
window.addEventListener('resize', () => { if (els.toBottom.hidden) scrollToBottom(); });
els.toBottom.addEventListener('click', () => {
  els.messages.scrollTo({ top: els.messages.scrollHeight, behavior: 'smooth' });
});
els.stop.addEventListener('click', stop);
els.demoBannerClose.addEventListener('click', () => {
  els.demoBanner.hidden = true;
  localStorage.setItem(DEMO_BANNER_DISMISSED, '1');
});
els.model.addEventListener('click', () => {
  if (els.model.classList.contains('needs-key')) openSettings();
});
els.thinkingToggle.addEventListener('change', () => {
  settings.thinking = els.thinkingToggle.checked;
  saveSettings(settings);
});
$('new-chat').addEventListener('click', newChat);
$('open-sidebar').addEventListener('click', openSidebar);
$('close-sidebar').addEventListener('click', closeSidebar);
els.scrim.addEventListener('click', closeSidebar);
$('open-settings').addEventListener('click', () => {
  closeSidebar();
  openSettings();
});
$('set-temperature').addEventListener('input', showRangeValues);
$('set-top-p').addEventListener('input', showRangeValues);
$('settings-reset').addEventListener('click', resetSettingsDialog);
$('settings-cancel').addEventListener('click', () => els.settings.close());
$('settings-form').addEventListener('submit', saveSettingsFromDialog);
// Code blocks are re-rendered while streaming, so their copy buttons are handled here, once.
els.messages.addEventListener('click', e => {
  const button = e.target.closest('.copy-code');
  if (button) copyText(button.closest('.code-block').querySelector('code').textContent, button);
});
document.addEventListener('keydown', e => {
  if (e.key === 'Escape' && active && document.activeElement === els.prompt) stop();
});

els.thinkingToggle.checked = settings.thinking;
renderAll();
loadModel();
els.prompt.focus();
