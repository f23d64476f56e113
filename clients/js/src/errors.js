// Refusals of the portable protocol: one error class with the protocol's code (docs/clients.md).

/** The error codes of the portable protocol, with their meaning. */
export const ERROR_CODES = Object.freeze({
  'spec.syntax': 'the spec does not match NAME(key=value,...)',
  'spec.unknown_mechanism': 'the name is not a portable mechanism',
  'spec.unknown_key': 'a key the mechanism does not take',
  'spec.duplicate_key': 'a key given twice',
  'spec.missing_key': 'a required key is absent (k may come from the domain)',
  'spec.bad_value': 'a value of the wrong type or outside its range',
  'domain.syntax': 'the domain string is not lo..hi or a label list',
  'value.out_of_domain': 'an input value that is not in the domain',
  'memo.invalid': 'a memo of another mechanism or input, or with bad fields',
});

/** A refusal with a protocol error code; `message` is `CODE: text` on one line. */
export class PortableError extends Error {
  constructor(code, text) {
    super(`${code}: ${String(text).split(/\s+/).join(' ')}`);
    this.name = 'PortableError';
    this.code = code;
    this.detail = text;
  }
}

/** A refusal outside the protocol's codes (bounds of this library, transport failures). */
export class ClientError extends Error {
  constructor(text) {
    super(String(text).split(/\s+/).join(' '));
    this.name = 'ClientError';
  }
}
