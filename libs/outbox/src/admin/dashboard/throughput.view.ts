import type { MinuteCount } from '../../store/admin/status.types';
import { html, type Html } from './html.util';

/** Deliveries per minute as an inline SVG line, oldest left. */
export function sparkline(minutes: readonly MinuteCount[]): Html {
  const width = 360;
  const height = 48;
  const max = Math.max(1, ...minutes.map((m) => m.delivered));
  const step = minutes.length > 1 ? width / (minutes.length - 1) : width;
  const points = minutes
    .map((m, i) => `${(i * step).toFixed(1)},${(height - (m.delivered / max) * height).toFixed(1)}`)
    .join(' ');
  const total = minutes.reduce((sum, m) => sum + m.delivered, 0);
  return html`<figure>
    <svg
      role="img"
      aria-label="deliveries per minute, last ${minutes.length} minutes"
      width="${width}"
      height="${height + 2}"
      viewBox="0 -1 ${width} ${height + 2}"
    >
      <polyline fill="none" stroke="#1f5fbf" stroke-width="1.5" points="${points}" />
    </svg>
    <figcaption class="muted" data-testid="throughput">
      ${total} delivered in the last ${minutes.length} minutes, at most ${max} a minute
    </figcaption>
  </figure>`;
}
