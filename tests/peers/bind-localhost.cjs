// Preload for `node --require`: make every net.Server listen on 127.0.0.1 when
// the program gives only a port (server-everything calls app.listen(PORT)).
// Override the host with ERAGATE_BIND_HOST.
'use strict';
const net = require('net');
const HOST = process.env.ERAGATE_BIND_HOST || '127.0.0.1';
const origListen = net.Server.prototype.listen;
net.Server.prototype.listen = function patchedListen(...args) {
  const first = args[0];
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    // listen(port[, host][, backlog][, cb]): insert the host unless one is given.
    if (typeof args[1] !== 'string') args.splice(1, 0, HOST);
  } else if (first && typeof first === 'object' && !Array.isArray(first) &&
             first.path === undefined && first.fd === undefined && first.handle === undefined &&
             !(first instanceof net.Server) && first._handle === undefined) {
    // listen({port, ...}[, cb])
    if (first.host === undefined) args[0] = { ...first, host: HOST };
  } else if (first === undefined || typeof first === 'function') {
    // listen() / listen(cb): random port
    args.unshift(0, HOST);
  }
  return origListen.apply(this, args);
};
