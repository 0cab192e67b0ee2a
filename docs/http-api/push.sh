#!/bin/sh
# Push a tracked job with curl, then read its status. WURK_URL is the mount point
# (https://example.com/wurk/v1), WURK_TOKEN a token with the enqueue and read scopes.
set -eu
answer=$(curl --fail-with-body -sS -X POST "$WURK_URL/jobs" \
  -H "Authorization: Bearer $WURK_TOKEN" \
  -H "Content-Type: application/json" \
  -H "Idempotency-Key: receipt-42" \
  -d '{"class": "shop.jobs.SendReceipt", "args": [42], "queue": "mail", "in": 60, "track": true}')
echo "$answer"
jid=$(echo "$answer" | sed 's/.*"jid": *"\([^"]*\)".*/\1/')
curl --fail-with-body -sS "$WURK_URL/jobs/$jid" -H "Authorization: Bearer $WURK_TOKEN"
