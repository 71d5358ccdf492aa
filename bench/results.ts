import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const RESULTS = path.resolve(import.meta.dirname, 'RESULTS.md');

/** The machine line printed above every result, so numbers are never read without their context. */
export function machineLine(): string {
  return `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
}

/** Replaces (or appends) the section between `<!-- name -->` markers in bench/RESULTS.md. */
export async function writeSection(name: string, markdown: string): Promise<void> {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const block = `${start}\n${markdown.trim()}\n${end}`;
  let text = await fs.readFile(RESULTS, 'utf8').catch(() => '# Benchmark results\n\nWritten by `npm run bench`; each section is replaced when its benchmark runs again.\n');
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  text = from >= 0 && to > from ? text.slice(0, from) + block + text.slice(to + end.length) : `${text.trimEnd()}\n\n${block}\n`;
  await fs.writeFile(RESULTS, text);
}
