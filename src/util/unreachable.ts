/** Ends a switch over a union: a new member that nobody handles fails to compile. */
export function unreachable(value: never): never {
  throw new Error(`unreachable: ${JSON.stringify(value)}`);
}
