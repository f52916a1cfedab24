// Bundles the sale page (src/main.js, with graphql-ws from node_modules) and
// its proof-of-work Web Worker (src/pow.js, with @noble/hashes) into dist/assets, each file named
// by a hash of its content, so the server can cache them for a year. The
// worker is built first and its name handed to the page as a constant. Run
// by `make salepage` (after npm ci), which then stamps dist/assets/.built, so
// that removing the assets builds them again; the output is never committed.
import { build } from 'esbuild';
import { rmSync } from 'node:fs';
import { basename } from 'node:path';

rmSync('dist/assets', { recursive: true, force: true });

const common = {
  outdir: 'dist/assets',
  entryNames: '[name]-[hash]',
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  legalComments: 'eof',
  logLevel: 'warning',
  metafile: true,
};

const outputs = (r) => Object.keys(r.metafile.outputs).map((p) => basename(p));

const worker = await build({ ...common, entryPoints: { pow: 'src/pow.js' } });
const powName = outputs(worker).find((n) => n.endsWith('.js'));
await build({
  ...common,
  entryPoints: { sale: 'src/main.js' },
  define: { __POW_WORKER__: JSON.stringify(powName), 'process.env.NODE_ENV': '"production"' },
});
