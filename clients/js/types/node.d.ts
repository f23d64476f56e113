// Node.js only: a ledger kept in a file, rewritten atomically (docs/accounting.md).
import type { Ledger, LedgerStorage } from './index.js';

export function fileStorage(path: string): LedgerStorage;
export function openLedger(path: string): Ledger;
