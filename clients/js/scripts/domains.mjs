// Reads a JSON list of [domain text, [values]] on standard input and prints, for each, the domain's
// size and each value's index or error code ({size, indices}), or the domain's error code ({error}).
// tests/test_client_js.py compares this with the Python reference.
import { readFileSync } from 'node:fs';
import { PortableError, encodeValue, parseDomain } from '../src/index.js';

const code = (fn) => {
  try {
    return fn();
  } catch (exc) {
    if (exc instanceof PortableError) return exc.code;
    throw exc;
  }
};
const cases = JSON.parse(readFileSync(0, 'utf8'));
const out = cases.map(([text, values]) => {
  const dom = code(() => parseDomain(text));
  if (typeof dom === 'string') return { error: dom };
  return { size: dom.size, indices: values.map((v) => code(() => encodeValue(dom, v))) };
});
process.stdout.write(`${JSON.stringify(out)}\n`);
