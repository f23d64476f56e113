// Node.js only: a ledger kept in a file, rewritten atomically (a temporary file beside it, synced,
// then renamed over it), as the Python reference writes it (docs/accounting.md, "The ledger file").
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ClientError } from './errors.js';
import { Ledger, MAX_LEDGER_BYTES } from './ledger.js';

/** A storage reading and writing `path` (a missing file reads as null, an empty ledger). */
export function fileStorage(path) {
  const file = String(path);
  return {
    load() {
      let size;
      try {
        size = statSync(file).size;
      } catch (exc) {
        if (exc.code === 'ENOENT') return null;
        throw new ClientError(`ledger ${file}: ${exc.message}`);
      }
      if (size > MAX_LEDGER_BYTES) throw new ClientError(`ledger ${file}: ${size.toLocaleString('en-US')} bytes exceed the limit of ${MAX_LEDGER_BYTES.toLocaleString('en-US')}`);
      return readFileSync(file, 'utf8');
    },
    save(text) {
      const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.${Date.now()}.tmp`);
      try {
        const fd = openSync(tmp, 'w', 0o600);
        try {
          writeSync(fd, text, null, 'utf8');
          fsyncSync(fd);
        } finally {
          closeSync(fd);
        }
        renameSync(tmp, file);
      } catch (exc) {
        try { unlinkSync(tmp); } catch { /* already gone */ }
        throw new ClientError(`ledger ${file}: cannot write (${exc.message})`);
      }
    },
  };
}

/** The ledger kept in the file `path` (created by the first record). */
export function openLedger(path) {
  return new Ledger(fileStorage(path), { name: String(path) });
}
