/** Markup already escaped: what `html` returns, and what it inserts as is. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c]);
}

/** What a template may insert: markup, text and numbers (escaped), nothing, or a list of these. */
export type Part = Html | string | number | boolean | null | undefined | readonly Part[];

function render(part: Part): string {
  if (part === null || part === undefined || part === false) return '';
  if (part instanceof Html) return part.text;
  if (Array.isArray(part)) return (part as readonly Part[]).map(render).join('');
  return escapeHtml(part);
}

/**
 * A template of markup: every value put in is escaped (event types, handler names and error
 * text are data, never markup), unless it is itself `html`. Lists are joined.
 */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let text = strings[0];
  values.forEach((value, i) => {
    text += render(value) + strings[i + 1];
  });
  return new Html(text);
}
