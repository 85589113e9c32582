import { BadRequestException } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';

/** Deepest nesting a body may have; no DTO here goes past two levels. */
export const MAX_INPUT_DEPTH = 32;

/** Longest key echoed in a message. */
const MAX_KEY_LENGTH = 64;
/** In a `u` regex a surrogate pair is one code point, so only a lone surrogate is `Cs`. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * What PostgreSQL would not store as given: NUL (text and jsonb refuse it, and the failed
 * statement is logged with its parameters) or a lone UTF-16 surrogate (jsonb refuses it, text
 * replaces it with U+FFFD, and some validators throw on it).
 */
export function unstorableText(text: string): string | undefined {
  if (text.includes('\u0000')) return 'NUL (\\u0000)';
  if (LONE_SURROGATE.test(text)) return 'a lone UTF-16 surrogate';
  return undefined;
}

/** A value still to check, and how it was reached; paths are built only for a problem. */
interface Pending {
  readonly value: unknown;
  readonly parent: Pending | undefined;
  readonly segment: string;
  readonly depth: number;
}

/**
 * The first string or key in parsed input that cannot be stored as given, or the first
 * top-level field nested deeper than `MAX_INPUT_DEPTH`, as a validation message naming the
 * field. The walk keeps its own stack, so no depth overflows it, and is linear in the input.
 */
export function findUnstorableInput(input: unknown): string | undefined {
  const stack: Pending[] = [{ value: input, parent: undefined, segment: '', depth: 0 }];
  for (let item = stack.pop(); item; item = stack.pop()) {
    const { value, depth } = item;
    if (typeof value === 'string') {
      const found = unstorableText(value);
      if (found) return `${pathOf(item)} must not contain ${found}`;
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    if (depth === MAX_INPUT_DEPTH) {
      return `${topFieldOf(item)} is nested deeper than ${MAX_INPUT_DEPTH} levels`;
    }
    const children: Pending[] = [];
    if (Array.isArray(value)) {
      value.forEach((child, i) =>
        children.push({ value: child, parent: item, segment: `[${i}]`, depth: depth + 1 }),
      );
    } else {
      for (const [key, child] of Object.entries(value)) {
        const found = unstorableText(key);
        if (found) return `${pathOf(item)} must not have a key containing ${found}`;
        const segment = depth === 0 ? shortKey(key) : `.${shortKey(key)}`;
        children.push({ value: child, parent: item, segment, depth: depth + 1 });
      }
    }
    // Reversed, so the first problem in document order is the one reported.
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]);
  }
  return undefined;
}

/**
 * Refuses, with the 400 the ValidationPipe would give, a request whose body or query holds
 * what `findUnstorableInput` finds. It runs right after the body parsers and before any pipe,
 * so validators and class-transformer never see such input.
 */
export function refuseUnstorableInput(req: Request, res: Response, next: NextFunction): void {
  const problem = findUnstorableInput(req.body) ?? findUnstorableInput(req.query);
  if (!problem) return next();
  res.status(400).json(new BadRequestException([problem]).getResponse());
}

function pathOf(item: Pending): string {
  let path = '';
  for (let at: Pending | undefined = item; at; at = at.parent) path = at.segment + path;
  // An array body has no field names: its elements are named from `body`.
  return path === '' || path.startsWith('[') ? `body${path}` : path;
}

function topFieldOf(item: Pending): string {
  let at = item;
  while (at.parent?.parent) at = at.parent;
  return at.parent ? pathOf(at) : 'body';
}

function shortKey(key: string): string {
  return key.length > MAX_KEY_LENGTH ? `${key.slice(0, MAX_KEY_LENGTH)}…` : key;
}
