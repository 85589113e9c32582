import { escapeControlsInJson, scrubError } from '../../common/scrub-error.util';

/**
 * Text on its way to a terminal or a CI log: each line scrubbed whole (no length bound), as
 * `scrubError` does for error text, so a secret in an argument echoed back (commander's
 * "unknown option '--database-url=postgres://app:…'") or a control sequence in an event's error
 * never reaches the screen.
 */
export function terminalText(text: string): string {
  return text
    .split('\n')
    .map((line) => (line === '' ? line : scrubError(line, Infinity)))
    .join('\n');
}

/** `--json` output: the same values when parsed, with no raw control or bidi character. */
export function terminalJson(json: string): string {
  return escapeControlsInJson(json);
}
