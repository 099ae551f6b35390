// Schema pieces the node's settings share.

import { z } from 'zod';

/**
 * A host or node path a setting names. It is written into unit files (one
 * value per line) and TOML, so a newline or other control character in it
 * is refused here, by its field, rather than by a renderer during an apply.
 */
export const absolutePath = z
  .string()
  .regex(/^\//, 'an absolute path')
  .regex(/^[^\u0000-\u001f\u007f]*$/, 'a path without a newline or other control character');
