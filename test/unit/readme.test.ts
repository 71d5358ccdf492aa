/**
 * The README is a map (issue 37): at most 300 lines, a four-command quick start, and every link in
 * it and in docs/ stays inside the repository and lands on a file, a folder or a heading that
 * exists. No page links to the web: names are written in plain text, and addresses such as
 * `http://localhost:8080/admin/` are code, never links.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const README = path.join(ROOT, 'README.md');
const DOCS = path.join(ROOT, 'docs');

function read(file: string): string {
  return fs.readFileSync(file, 'utf8');
}

function pages(): string[] {
  const docs = fs.existsSync(DOCS)
    ? fs.readdirSync(DOCS).filter((name) => name.endsWith('.md')).map((name) => path.join(DOCS, name))
    : [];
  return [README, ...docs.sort()];
}

/** The text with fenced code blocks blanked (line count kept). */
function withoutFences(markdown: string): string {
  const lines = markdown.split('\n');
  let fence: string | null = null;
  const kept = lines.map((line) => {
    const opener = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence !== null) {
      if (opener && opener[1]![0] === fence[0] && opener[1]!.length >= fence.length) fence = null;
      return '';
    }
    if (opener) {
      fence = opener[1]!;
      return '';
    }
    return line;
  });
  return kept.join('\n');
}

/** The text with fenced code blocks blanked and inline code spans removed: what can link. */
function prose(markdown: string): string {
  return withoutFences(markdown).replace(/(`+)[\s\S]*?\1/g, ' ');
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const line of withoutFences(markdown).split('\n')) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const text = heading[1]!
      .replace(/`([^`]*)`/g, '$1')
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .replace(/[*_~]{1,3}(\S[^*_~]*?)[*_~]{1,3}/g, '$1');
    const base = text
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

interface Link {
  file: string;
  target: string;
}

/** Inline links and images, reference definitions and HTML href/src, outside code. */
function links(file: string): Link[] {
  const text = prose(read(file));
  const found: Link[] = [];
  for (const match of text.matchAll(/!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) found.push({ file, target: match[1]! });
  for (const match of text.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) found.push({ file, target: match[1]! });
  for (const match of text.matchAll(/\b(?:href|src)\s*=\s*["']([^"']*)["']/gi)) found.push({ file, target: match[1]! });
  return found;
}

function relative(file: string): string {
  return path.relative(ROOT, file);
}

test('README.md is a map of at most 300 lines', (t) => {
  const lines = read(README).replace(/\n$/, '').split('\n').length;
  t.true(lines <= 300, `README.md has ${lines} lines`);
});

test('the quick start is four commands: install, start, warden demo, open the web admin', (t) => {
  const readme = read(README);
  const section = /^## Quick start\n([\s\S]*?)(?=^## )/m.exec(readme);
  t.truthy(section, 'README.md has a "## Quick start" section');
  const steps = [...section![1]!.matchAll(/^(\d+)\. (.*)$/gm)];
  t.deepEqual(
    steps.map((step) => step[1]),
    ['1', '2', '3', '4'],
    'four numbered steps',
  );
  const expected = ['`npm install`', '`npm start`', '`npx warden demo`', '`http://localhost:8080/admin/`'];
  expected.forEach((command, index) => t.true(steps[index]![2]!.includes(command), `step ${index + 1} holds ${command}`));
  t.regex(section![1]!, /`npm test`/);
});

test('the quick start names the real port and the demo command that exists', (t) => {
  const config = read(path.join(ROOT, 'src/config.ts'));
  t.regex(config, /PORT: port\.default\(8080\)/);
  const pkg = JSON.parse(read(path.join(ROOT, 'package.json'))) as { bin: Record<string, string>; scripts: Record<string, string> };
  t.truthy(pkg.bin.warden, 'package.json bin names warden, which npx warden runs');
  t.truthy(pkg.scripts.start);
  t.regex(read(path.join(ROOT, 'src/cli/main.ts')), /\bdemo: demoCommand\b/);
});

test('no page links outside the repository or to the web', (t) => {
  for (const file of pages()) {
    const text = prose(read(file));
    const web = text.match(/\b(?:https?|ftp):\/\/\S*|\bwww\.\S+/gi) ?? [];
    t.deepEqual(web, [], `${relative(file)}: an address outside code is a link on GitHub; write it as code or as plain text`);
    for (const { target } of links(file)) {
      t.false(/^[a-z][a-z0-9+.-]*:/i.test(target), `${relative(file)}: ${target} is not a relative link`);
      t.false(target.startsWith('/'), `${relative(file)}: ${target} is absolute`);
      const [where] = target.split('#');
      const resolved = path.resolve(path.dirname(file), decodeURIComponent(where!));
      t.true(
        resolved === ROOT || resolved.startsWith(ROOT + path.sep),
        `${relative(file)}: ${target} leaves the repository`,
      );
    }
  }
});

test('every link lands on a file or folder that exists, and every #anchor on a heading', (t) => {
  let checked = 0;
  for (const file of pages()) {
    for (const { target } of links(file)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // refused by the test above
      const hash = target.indexOf('#');
      const where = hash === -1 ? target : target.slice(0, hash);
      const anchor = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
      const resolved = where === '' ? file : path.resolve(path.dirname(file), decodeURIComponent(where));
      checked += 1;
      if (!fs.existsSync(resolved)) {
        t.fail(`${relative(file)}: ${target}: ${relative(resolved)} does not exist`);
        continue;
      }
      if (anchor !== null) {
        t.true(resolved.endsWith('.md'), `${relative(file)}: ${target}: an anchor into a file that is not markdown`);
        const headings = anchors(read(resolved));
        t.true(headings.has(anchor), `${relative(file)}: ${target}: no heading #${anchor} in ${relative(resolved)}`);
      }
    }
  }
  t.true(checked > 10, `only ${checked} links found: the reader is broken`);
});

test('the heading anchors follow GitHub', (t) => {
  const sample = [
    '# Security notes: what the API refuses and why',
    '## Push (FCM and APNs)',
    '## The demo data set (`warden demo`)',
    '## Case work: alerts, cases, decisions and approvals',
    '### Web admin',
    '### Web admin',
  ].join('\n');
  t.deepEqual(
    [...anchors(sample)],
    [
      'security-notes-what-the-api-refuses-and-why',
      'push-fcm-and-apns',
      'the-demo-data-set-warden-demo',
      'case-work-alerts-cases-decisions-and-approvals',
      'web-admin',
      'web-admin-1',
    ],
  );
});
