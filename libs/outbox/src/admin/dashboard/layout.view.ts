import { html, Html } from './html.util';

const STYLE = `
  body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 1rem 1.5rem; color: #1d2330; }
  h1 { font-size: 1.3rem; margin: 0 0 .75rem; } h2 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
  a { color: #1f5fbf; } nav a { margin-right: 1rem; }
  table { border-collapse: collapse; width: 100%; } th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #e3e6ec; vertical-align: top; }
  th { font-weight: 600; background: #f5f6f8; } th.n, td.n { text-align: right; font-variant-numeric: tabular-nums; }
  .cards { display: flex; gap: .75rem; flex-wrap: wrap; } .card { border: 1px solid #e3e6ec; border-radius: 6px; padding: .5rem .8rem; min-width: 7rem; }
  .card b { display: block; font-size: 1.35rem; } .dead b { color: #b3261e; } .muted { color: #5f6b7a; }
  .notice { background: #e8f3e8; border: 1px solid #9ccc9c; padding: .5rem .8rem; border-radius: 6px; }
  form.inline { display: inline; } button { font: inherit; padding: .15rem .6rem; cursor: pointer; }
  button.danger { color: #b3261e; } pre { background: #f5f6f8; padding: .6rem; overflow: auto; }
  code { font-size: .92em; } input[type=text] { font: inherit; width: 28rem; max-width: 100%; }
`;

/** A whole page: the style, the navigation and the title around `body`. */
export function page(title: string, base: string, body: Html, refreshSeconds?: number): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        ${refreshSeconds ? html`<meta http-equiv="refresh" content="${refreshSeconds}" />` : ''}
        <title>${title} · outbox</title>
        <style>
          ${new Html(STYLE)}
        </style>
      </head>
      <body>
        <nav>
          <a href="${base}">Overview</a><a href="${base}/dead">Dead letters</a
          ><a href="${base}/blocked">Blocked keys</a>
        </nav>
        <h1>${title}</h1>
        ${body}
      </body>
    </html>`.text;
}

/** The short page of an error: its status and message. */
export function errorPage(status: number, message: string): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>${status} · outbox</title>
      </head>
      <body>
        <h1>${status}</h1>
        <p data-testid="error">${message}</p>
      </body>
    </html>`.text;
}
