// Branded ids and hashes, so a task id, a path and a digest cannot be mixed up.

/** A task's stable, namespaced id, e.g. `kube1/containerd.config`. */
export type TaskId = string & { readonly __brand: 'TaskId' };

/** A content digest in OCI form: `sha256:<64 hex>`. */
export type ContentHash = string & { readonly __brand: 'ContentHash' };

export const taskId = (id: string): TaskId => id as TaskId;
export const contentHash = (hex: string): ContentHash => `sha256:${hex}` as ContentHash;
/** 'sha256:'.length: where a ContentHash's hex digits start. */
export const HASH_PREFIX = 7;

/** The first 8 hex digits of a digest, as shown to users (`a1b2c3d4`). */
export const shortHash = (hash: ContentHash | undefined): string =>
  hash === undefined ? 'none' : hash.slice(7, 15);
