/**
 * Who made a write, recorded with it. A type of its own, with no imports, so that services,
 * the audit log and the context can all name it without importing each other.
 */
export type Actor =
  | { type: 'merchant'; id: string }
  | { type: 'staff'; id: string }
  | { type: 'operator'; id: string }
  | { type: 'system'; id: string };
