// Safe Markdown: marked turns the text into HTML (raw HTML in the text is shown as text, never
// interpreted), DOMPurify cleans the result, and highlight.js colours the code blocks, which get a
// header with their language and a copy button.

const { marked, DOMPurify, hljs } = window;

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

const markdown = new marked.Marked({
  gfm: true,
  breaks: true,             // a single newline from the model is a line break, as it meant
  async: false,
  renderer: {
    // The model's text is data, not markup: a "<script>" it writes is shown, not run.
    html: ({ text }) => escapeHtml(text),
  },
});

DOMPurify.addHook('afterSanitizeAttributes', node => {
  if (node.tagName === 'A' && node.hasAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
  // The page talks to this server only: an image from elsewhere becomes a link the user may follow.
  if (node.tagName === 'IMG') {
    const src = node.getAttribute('src') ?? '';
    const local = src.startsWith('data:image/') || new URL(src, location.href).origin === location.origin;
    if (!local) {
      const link = document.createElement('a');
      link.href = src;
      link.textContent = node.getAttribute('alt') || src;
      link.target = '_blank';
      link.rel = 'noopener noreferrer';
      node.replaceWith(link);
    }
  }
});

const PURIFY = { FORBID_TAGS: ['style', 'form'], FORBID_ATTR: ['style'] };

/** Replaces element's content with the rendered text. */
export function renderMarkdown(element, text) {
  const html = markdown.parse(text);
  element.innerHTML = DOMPurify.sanitize(html, PURIFY);
  for (const code of element.querySelectorAll('pre > code')) decorateCode(code);
}

function decorateCode(code) {
  const match = /language-([\w+#.-]+)/.exec(code.className);
  const language = match && hljs.getLanguage(match[1]) ? match[1] : null;
  const source = code.textContent;
  const highlighted = language
    ? hljs.highlight(source, { language, ignoreIllegals: true })
    : hljs.highlight(source, { language: 'plaintext' });
  code.innerHTML = highlighted.value;      // highlight.js escapes the source it wraps in spans
  code.classList.add('hljs');

  const pre = code.parentElement;
  const block = document.createElement('div');
  block.className = 'code-block';
  const head = document.createElement('div');
  head.className = 'code-head';
  const label = document.createElement('span');
  label.textContent = match ? match[1] : 'text';
  const copy = document.createElement('button');
  copy.type = 'button';
  copy.className = 'copy-code';
  copy.textContent = 'Copy';
  head.append(label, copy);
  pre.replaceWith(block);
  block.append(head, pre);
}
