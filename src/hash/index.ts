// Content hashing: values, files (streamed, and through the stat-keyed cache), trees, globs.

export { canonicalJson, hashParts, hashString, hashValue } from './value.ts';
export { ASYNC_CHUNK_BYTES, CHUNK_BYTES, sha256FdSync, sha256FileAsync, sha256FileSync, sha256HandleAsync, type FileDigest } from './file.ts';
export {
  HashCache,
  type FileObservation,
  type HashCacheOptions,
  type HashCacheStats,
} from './cache.ts';
export { hashAsync, hashUnlessLarge, lookThrough, Unread, type Look } from './large.ts';
export { hashTree, walkTree, type TreeEntry, type TreeHash } from './tree.ts';
export { EMPTY_GLOB_HASH, hashGlob, type GlobHash } from './glob.ts';
