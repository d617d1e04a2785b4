// How the host refuses: one error type with the contract's code and the field at fault.
//
// A refused manifest gets a MAN code of docs/hosts.md (the same code the Python and C hosts give
// it) and `field`, the path of the manifest field at fault (`kernels[0].file`); a refused call
// gets the checker's code (GPU035 a dim not given, GPU040 an input of the wrong size, GPU041 a
// value of the wrong type, GPU042 a dim outside its constraints, GPU043 a value outside its range).

export class ManifestError extends Error {
  /** `code`: the refusal's code, also shown in the message; `field`: the manifest field at fault. */
  constructor(message, code, field) {
    const where = field ? `${field}: ` : '';
    super(code ? `[${code}] ${where}${message}` : `${where}${message}`);
    this.name = 'ManifestError';
    if (code) this.code = code;
    if (field) this.field = field;
    this.reason = message;
  }
}

/** A dim expression that does not parse, or cannot be evaluated (code MAN005). */
export class DimExprError extends ManifestError {
  constructor(message, field) {
    super(message, 'MAN005', field);
    this.name = 'DimExprError';
  }
}
