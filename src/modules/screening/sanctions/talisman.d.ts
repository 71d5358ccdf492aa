// talisman ships CommonJS without type declarations; only the entry points used here are declared.
declare module 'talisman/phonetics/double-metaphone.js' {
  /** [primary, secondary] codes, each at most 4 characters; empty strings for input without letters. */
  export default function doubleMetaphone(word: string): [string, string];
}
