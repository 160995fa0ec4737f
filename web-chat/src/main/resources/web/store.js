// Conversations kept in the browser: one localStorage entry holding every conversation, written
// after each change so that a reload (or a closed tab) loses nothing.

const KEY = 'glimmer.conversations';
const CURRENT_KEY = 'glimmer.current';

function newId() {
  return Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
}

export class ConversationStore {
  constructor() {
    this.conversations = [];
    try {
      const saved = JSON.parse(localStorage.getItem(KEY) ?? '[]');
      if (Array.isArray(saved)) this.conversations = saved.filter(c => c && Array.isArray(c.messages));
    } catch {
      this.conversations = [];
    }
    // An answer that was streaming when the page went away ends as "stopped", not as a spinner forever.
    for (const c of this.conversations) {
      for (const m of c.messages) {
        if (m.role === 'assistant' && m.pending) {
          delete m.pending;
          m.stopped = true;
        }
      }
    }
    this.currentId = localStorage.getItem(CURRENT_KEY);
    if (!this.get(this.currentId)) this.currentId = this.conversations[0]?.id ?? null;
  }

  /** Newest first. */
  list() {
    return [...this.conversations].sort((a, b) => b.updated - a.updated);
  }

  get(id) {
    return this.conversations.find(c => c.id === id) ?? null;
  }

  current() {
    return this.get(this.currentId);
  }

  create() {
    const now = Date.now();
    const conversation = { id: newId(), title: '', messages: [], created: now, updated: now };
    this.conversations.push(conversation);
    this.select(conversation.id);
    return conversation;
  }

  select(id) {
    this.currentId = id;
    if (id) localStorage.setItem(CURRENT_KEY, id); else localStorage.removeItem(CURRENT_KEY);
    this.save();
  }

  rename(id, title) {
    const c = this.get(id);
    if (!c) return;
    c.title = title.trim();
    this.save();
  }

  delete(id) {
    this.conversations = this.conversations.filter(c => c.id !== id);
    if (this.currentId === id) this.select(this.list()[0]?.id ?? null);
    this.save();
  }

  /** Call after changing a conversation's messages. */
  touch(conversation) {
    conversation.updated = Date.now();
    this.save();
  }

  save() {
    try {
      localStorage.setItem(KEY, JSON.stringify(this.conversations));
    } catch (e) {
      // Quota exceeded: the conversation stays on screen; say so rather than losing it silently.
      console.warn('could not save the conversations: ' + e.message);
    }
  }
}

/** The title the sidebar shows: the user's own, else the start of the first message. */
export function displayTitle(conversation) {
  if (conversation.title) return conversation.title;
  const first = conversation.messages.find(m => m.role === 'user');
  if (!first) return 'New chat';
  const text = first.content.replace(/\s+/g, ' ').trim();
  return text.length > 48 ? text.slice(0, 47) + '…' : text || 'New chat';
}
