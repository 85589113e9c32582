/** What the CLI's exit status tells a script. */
export const EXIT = {
  /** Done. */
  ok: 0,
  /** The database could not be reached or failed the statement. */
  failure: 1,
  /** Bad arguments: nothing was sent to the database. */
  usage: 2,
  /** `dead show`: no event has this id. */
  notFound: 3,
  /** `status --fail-on-dead`: dead letters exist. */
  deadLetters: 4,
  /** `dead replay` / `dead discard` by filter: another change by filter is running. */
  changeInProgress: 5,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
