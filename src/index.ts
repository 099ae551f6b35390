// What a Nodefile imports from nodegraph: its types, and only they, so a
// project's own tsc checks a Nodefile with nothing else installed (no
// @types/node). The engine as a library is `nodegraph/library`.

export type {
  AbortSignalLike,
  Argv,
  CheckFunction,
  Command,
  ExecOptions,
  ExecResult,
  GraphSettings,
  HealthSpec,
  InputSpec,
  Json,
  Nodefile,
  NodefileApi,
  Signal,
  SourceSite,
  TaskContext,
  TaskFunction,
  TaskInput,
  TaskRef,
  TaskSpec,
} from './nodefile/types.ts';
