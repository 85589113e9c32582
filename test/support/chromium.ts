import { execFileSync } from 'node:child_process';
import { createReadStream, createWriteStream, existsSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createBrotliDecompress } from 'node:zlib';

/** How to launch the browser: playwright-core's `executablePath` and `env` options. */
export interface ChromiumLaunch {
  executablePath: string;
  /** The browser's environment, when it differs from this process's. */
  env?: Record<string, string | undefined>;
}

const SYSTEM_CHROMIUMS = [
  '/usr/bin/chromium',
  '/usr/bin/chromium-browser',
  '/usr/bin/google-chrome',
];

/**
 * The Chromium the dashboard's browser test drives, chosen so that `npm install` and `npm test`
 * are all a fresh machine needs: Playwright's own browser download may be out of reach, and
 * `apt-get install chromium` needs root. In this order:
 *
 * 1. `CHROMIUM_PATH`, when set (it must exist);
 * 2. on Linux x64, the headless Chromium that the devDependency `@sparticuz/chromium` ships
 *    inside its npm package (brotli files, no install script), unpacked on first use into
 *    `node_modules/.cache/`, with the NSS and expat libraries the package ships for it on
 *    `LD_LIBRARY_PATH` and its own fonts, so that it needs no system package beyond glibc 2.34
 *    or later (Debian 12, Ubuntu 22.04). It stays on major 143: later majors declare Node 22,
 *    and this project supports Node 20;
 * 3. a system Chromium or Chrome: /usr/bin/chromium, /usr/bin/chromium-browser,
 *    /usr/bin/google-chrome.
 */
export async function findChromium(): Promise<ChromiumLaunch> {
  const named = process.env.CHROMIUM_PATH;
  if (named) {
    if (!existsSync(named)) throw new Error(`CHROMIUM_PATH names ${named}, which does not exist`);
    return { executablePath: named };
  }
  const shipped = shippedChromiumBin();
  if (shipped) return unpackShippedChromium(shipped);
  const system = SYSTEM_CHROMIUMS.find((path) => existsSync(path));
  if (system) return { executablePath: system };
  throw new Error(
    `the dashboard test drives a real Chromium and found none: on Linux x64 \`npm install\` ` +
      `brings one (@sparticuz/chromium); elsewhere set CHROMIUM_PATH to a Chromium or Chrome, ` +
      `or install one at ${SYSTEM_CHROMIUMS.join(', ')}`,
  );
}

/** The bin/ folder of @sparticuz/chromium, when it is installed and built for this platform. */
function shippedChromiumBin(): string | undefined {
  // The package ships an x86-64 Linux build only.
  if (process.platform !== 'linux' || process.arch !== 'x64') return undefined;
  let entry: string;
  try {
    entry = require.resolve('@sparticuz/chromium');
  } catch {
    return undefined;
  }
  // The entry is <package>/build/cjs/index.cjs; the brotli files are in <package>/bin.
  const bin = join(dirname(entry), '..', '..', 'bin');
  return existsSync(join(bin, 'chromium.br')) ? bin : undefined;
}

/**
 * Unpacks the shipped browser once per package version into node_modules/.cache (a folder
 * renamed into place only when complete, so an interrupted or concurrent run never leaves or
 * sees half a browser). Unlike the package's own `executablePath()`, which unpacks into
 * /tmp/chromium and keeps whatever is there, this never runs a stale version.
 */
async function unpackShippedChromium(bin: string): Promise<ChromiumLaunch> {
  const pkg = JSON.parse(readFileSync(join(bin, '..', 'package.json'), 'utf8')) as {
    version: string;
  };
  // bin is <node_modules>/@sparticuz/chromium/bin, so ../../.. is <node_modules>.
  const dir = join(bin, '../../../.cache/sparticuz-chromium', pkg.version);
  if (!existsSync(join(dir, 'chromium'))) {
    const partial = `${dir}.partial-${process.pid}`;
    await rm(partial, { recursive: true, force: true });
    await mkdir(partial, { recursive: true });
    await pipeline(
      createReadStream(join(bin, 'chromium.br')),
      createBrotliDecompress(),
      createWriteStream(join(partial, 'chromium'), { mode: 0o755 }),
    );
    // al2023: lib/ with libnss3, libnspr4, libexpat and their kin, which the binary links to.
    // swiftshader: libEGL, libGLESv2 and Vulkan beside the binary, its software GPU.
    // fonts: Open Sans, so text renders without system fonts.
    for (const archive of ['al2023.tar.br', 'swiftshader.tar.br', 'fonts.tar.br']) {
      const tar = join(partial, archive.replace(/\.br$/, ''));
      await pipeline(
        createReadStream(join(bin, archive)),
        createBrotliDecompress(),
        createWriteStream(tar),
      );
      execFileSync('tar', ['-xf', tar, '--no-same-owner', '-C', partial]);
      await rm(tar);
    }
    // The package's fonts.conf names Lambda's folders; this one names the unpacked fonts (and
    // the system's, where there are any).
    await writeFile(
      join(partial, 'fonts.conf'),
      [
        '<?xml version="1.0"?>',
        '<!DOCTYPE fontconfig SYSTEM "fonts.dtd">',
        '<fontconfig>',
        `  <dir>${xmlText(join(dir, 'fonts'))}</dir>`,
        '  <dir>/usr/share/fonts</dir>',
        `  <cachedir>${xmlText(join(dir, 'fonts-cache'))}</cachedir>`,
        '</fontconfig>',
        '',
      ].join('\n'),
    );
    try {
      await rename(partial, dir);
    } catch (error) {
      // Another run put its copy in place first: use that one.
      await rm(partial, { recursive: true, force: true });
      if (!existsSync(join(dir, 'chromium'))) throw error;
    }
  }
  const lib = join(dir, 'lib');
  const inherited = process.env.LD_LIBRARY_PATH;
  return {
    executablePath: join(dir, 'chromium'),
    env: {
      ...process.env,
      LD_LIBRARY_PATH: inherited ? `${lib}:${inherited}` : lib,
      FONTCONFIG_FILE: join(dir, 'fonts.conf'),
    },
  };
}

/** `text` as XML character data. */
function xmlText(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
