import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadOptionalPackage } from './optional-package.util';

describe('loadOptionalPackage', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'optional-package-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('loads a package the app installed', () => {
    expect(typeof loadOptionalPackage<{ Client: unknown }>('pg')?.Client).toBe('function');
  });

  it('gives undefined for a package the app did not install', () => {
    expect(loadOptionalPackage('@nestjs/not-installed-here')).toBeUndefined();
  });

  it('throws when the package is there but fails to load, even for a missing module of its own', () => {
    const broken = join(dir, 'broken.js');
    writeFileSync(broken, "require('a-dependency-nobody-installed');\n");
    expect(() => loadOptionalPackage(broken)).toThrow(/a-dependency-nobody-installed/);
    const throwing = join(dir, 'throwing.js');
    writeFileSync(throwing, "throw new Error('boom at load');\n");
    expect(() => loadOptionalPackage(throwing)).toThrow('boom at load');
  });
});
