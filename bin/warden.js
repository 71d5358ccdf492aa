#!/usr/bin/env node
// The operator command line. The sources are TypeScript run through tsx, as `npm start` does.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
