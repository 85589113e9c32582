import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { alreadyLoadedPackage, loadOptionalPackage } from './optional-package.util';

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

describe('alreadyLoadedPackage', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'loaded-package-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('never loads a package itself, and gives it once the app has', () => {
    const path = join(dir, 'side-effect.js');
    writeFileSync(
      path,
      'globalThis.__sideEffectLoads = (globalThis.__sideEffectLoads ?? 0) + 1;\nexports.value = 42;\n',
    );
    const loads = () => (globalThis as { __sideEffectLoads?: number }).__sideEffectLoads ?? 0;
    expect(alreadyLoadedPackage(path)).toBeUndefined();
    expect(loads()).toBe(0);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require(path);
    expect(alreadyLoadedPackage<{ value: number }>(path)?.value).toBe(42);
    expect(loads()).toBe(1);
  });

  it('gives undefined for a package the app did not install', () => {
    expect(alreadyLoadedPackage('@nestjs/not-installed-here')).toBeUndefined();
  });
});
