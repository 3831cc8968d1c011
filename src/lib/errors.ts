/** A failure the operator can act on: the CLI prints its message as one line and exits 1. */
export class OperatorError extends Error {}
