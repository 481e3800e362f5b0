// The official Node SDK's event handler, as its README shows it: a plain `http` server
// that hands each request to the SDK's `EventDispatcher` through the SDK's own adapter
// for Node's http server (`adaptDefault`), with an `im.message.receive_v1` handler that
// does nothing and stores nothing. bench/load.sh runs it beside the bridge as a baseline.
//
//   NODE_PATH=<dir>/node_modules FB_BENCH_ENCRYPT_KEY=… FB_BENCH_TOKEN=… \
//       node bench/node_sdk_handler.js 127.0.0.1:18082
//
// Events are accepted at POST /webhook/bench/event (the bridge's path for the bench
// profile). The dispatcher gets the encrypt key, so the SDK checks each request's
// signature (X-Lark-Signature: SHA-256 of timestamp, nonce, key and body) and decrypts
// the body, as in production; it has no switch for the signature check short of leaving
// the key out. It also gets the verification token, which the SDK reads only for card
// callbacks: it does not compare an event's token. FB_BENCH_AUTO_CHALLENGE=1 (the
// default) turns on the adapter's `autoChallenge`, which a deployment needs to pass
// Feishu's request-URL check; the SDK then decrypts every event a second time to see
// whether it is a challenge.
//
// The SDK answers 200 whatever happens to the event (a bad signature or a body it cannot
// decrypt is logged and answered 200 with an empty body), so the handler counts what it
// was really handed: GET /handled answers "handled=N foreign=M", where N counts the
// decrypted im.message.receive_v1 events that carry the configured verification token
// (the token sits inside the encrypted body, so it proves the decryption) and M those
// that do not. The load script compares N with wrk's 200s. Any other request gets 404
// (the adapter would leave it unanswered).

'use strict';

const http = require('http');

let lark;
try {
    lark = require('@larksuiteoapi/node-sdk');
} catch (e) {
    process.stderr.write(
        'node_sdk_handler: cannot load @larksuiteoapi/node-sdk; set NODE_PATH to the ' +
            `node_modules folder it was installed into (bench/load.sh does): ${e.message}\n`,
    );
    process.exit(2);
}

const EVENT_PATH = '/webhook/bench/event';

const listen = process.argv[2] || '';
const match = /^([^:]+):(\d+)$/.exec(listen);
const encryptKey = process.env.FB_BENCH_ENCRYPT_KEY || '';
const verificationToken = process.env.FB_BENCH_TOKEN || '';
const autoChallenge = (process.env.FB_BENCH_AUTO_CHALLENGE || '1') === '1';
if (!match || !encryptKey || !verificationToken) {
    process.stderr.write(
        'usage: FB_BENCH_ENCRYPT_KEY=KEY FB_BENCH_TOKEN=TOKEN node node_sdk_handler.js HOST:PORT\n',
    );
    process.exit(2);
}

let handled = 0;
let foreign = 0;

const eventDispatcher = new lark.EventDispatcher({ encryptKey, verificationToken }).register({
    'im.message.receive_v1': async (data) => {
        // The v2 header's fields are merged into `data` by the SDK.
        if (data.token === verificationToken && data.message && data.message.message_id) {
            handled += 1;
        } else {
            foreign += 1;
        }
    },
});

const adapter = lark.adaptDefault(EVENT_PATH, eventDispatcher, { autoChallenge });

const server = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === EVENT_PATH) {
        adapter(req, res).catch((e) => {
            process.stderr.write(`node_sdk_handler: ${e && e.message}\n`);
            if (!res.headersSent) {
                res.statusCode = 500;
            }
            res.end();
        });
    } else if (req.method === 'GET' && req.url === '/handled') {
        res.setHeader('Content-Type', 'text/plain');
        res.end(`handled=${handled} foreign=${foreign}\n`);
    } else {
        req.resume();
        res.statusCode = 404;
        res.end();
    }
});

server.listen(Number(match[2]), match[1]);

const stop = () => {
    server.close();
    server.closeAllConnections();
    process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
