// Bundles src/main.js with GraphiQL, React, graphql and graphql-ws from
// node_modules into dist/assets/playground.{js,css}, which the Go package
// embeds. Run by `make playground` (after npm ci); never committed.
import { build } from 'esbuild';

await build({
  entryPoints: { playground: 'src/main.js' },
  outdir: 'dist/assets',
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  define: { 'process.env.NODE_ENV': '"production"' },
  legalComments: 'eof',
  logLevel: 'warning',
});
