// The seckill playground: GraphiQL against the endpoint named by the page
// (data-endpoint), with queries and mutations over HTTP POST and
// subscriptions over WebSocket (graphql-transport-ws, the graphql-ws
// client). The headers editor's values travel as HTTP headers and, for a
// subscription, as the connection_init payload, so
// {"Authorization": "Bearer <token>"} authenticates both.
//
// The URL fragment may prefill the editors:
// /playground#query=...&variables=...&headers=... (a fragment never reaches
// the server, so a token in it stays out of logs).
import { createElement } from 'react';
import { createRoot } from 'react-dom/client';
import { GraphiQL } from 'graphiql';
import { createGraphiQLFetcher } from '@graphiql/toolkit';
import 'graphiql/style.css';
import './page.css';

const root = document.getElementById('graphiql');
const http = new URL(root.dataset.endpoint, window.location.href);
const ws = new URL(http);
ws.protocol = http.protocol === 'https:' ? 'wss:' : 'ws:';

const fetcher = createGraphiQLFetcher({
  url: http.href,
  subscriptionUrl: ws.href,
  // gqlgen answers application/json; no multipart incremental delivery.
  enableIncrementalDelivery: false,
});

const props = { fetcher };
const prefill = new URLSearchParams(window.location.hash.slice(1));
for (const key of ['query', 'variables', 'headers']) {
  if (prefill.has(key)) props[key] = prefill.get(key);
}

createRoot(root).render(createElement(GraphiQL, props));
