// Content hashing: values, files (with the stat-keyed cache), trees, globs.

export { canonicalJson, hashParts, hashString, hashValue } from './value.ts';
export { HashCache, sha256File, type FileObservation, type HashCacheCounters } from './cache.ts';
export { hashTree } from './tree.ts';
export { hashGlob } from './glob.ts';
