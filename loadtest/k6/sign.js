// The router's request-bound signature (cluster_protocol::principal, version
// 2) for the direct path: HMAC-SHA256 with the cluster secret over
// `v2\n<ts>\n<METHOD>\n<path?query>\n<sha256(body) hex>\n<principal>`.
import crypto from 'k6/crypto';

const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

// The path and query of `url` exactly as k6 sends them (the URL is used as written).
export function target(url) {
  const rest = url.replace(/^[a-z]+:\/\/[^/]+/, '');
  return rest === '' ? '/' : rest;
}

// Headers signing one request: `principal` is the base64url principal JSON.
export function signedHeaders(secret, principal, method, url, body) {
  const ts = String(Math.floor(Date.now() / 1000));
  const digest = body ? crypto.sha256(body, 'hex') : EMPTY_SHA256;
  const text = `v2\n${ts}\n${method}\n${target(url)}\n${digest}\n${principal}`;
  return {
    'x-cluster-principal': principal,
    'x-cluster-timestamp': ts,
    'x-cluster-signature-version': '2',
    'x-cluster-body-sha256': digest,
    'x-cluster-signature': crypto.hmac('sha256', secret, text, 'hex'),
  };
}
