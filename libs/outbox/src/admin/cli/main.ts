#!/usr/bin/env node
// Decorated classes of the library read their metadata through it, as in a Nest app.
import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { runCli } from './cli.program';

// The library logs through Nest's logger, which writes to stdout: only errors (stderr) here, so
// stdout holds the command's output alone (`--json` stays parseable). The command reports what
// the logs would have said.
Logger.overrideLogger(['error']);

void runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
}).then((status) => {
  process.exitCode = status;
});
