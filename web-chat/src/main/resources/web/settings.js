// The user's settings, kept in localStorage. Sampling values left empty are not sent, so the
// server's own defaults apply.

const KEY = 'glimmer.settings';

export const DEFAULTS = Object.freeze({
  systemPrompt: '',
  temperature: 0.8,
  topP: 0.95,
  maxTokens: null,
  thinking: true,
  apiKey: '',
});

export function loadSettings() {
  try {
    const saved = JSON.parse(localStorage.getItem(KEY) ?? '{}');
    return { ...DEFAULTS, ...saved };
  } catch {
    return { ...DEFAULTS };
  }
}

/** Whether the user has chosen a value for the setting `name` (it is saved), rather than left the default. */
export function chosen(name) {
  try {
    return name in JSON.parse(localStorage.getItem(KEY) ?? '{}');
  } catch {
    return false;
  }
}

export function saveSettings(settings) {
  localStorage.setItem(KEY, JSON.stringify(settings));
}
