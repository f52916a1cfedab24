package store

import (
	"context"
	"testing"
)

// SetEndpointDeleteChunk makes DeleteEndpoint delete n deliveries a
// statement until the test ends.
func SetEndpointDeleteChunk(tb testing.TB, n int) {
	old := endpointDeleteChunk
	endpointDeleteChunk = n
	tb.Cleanup(func() { endpointDeleteChunk = old })
}

// DeleteDeliveries runs the first step of DeleteEndpoint alone: it
// returns how many statements deleted deliveries.
func DeleteDeliveries(s *Store, ctx context.Context, id int64) (int, error) {
	return s.deleteDeliveries(ctx, id)
}

// CloseBacklog is how many CloseOrder calls may wait for a transaction.
const CloseBacklog = closeBacklog

// TextArray and Int64Array write the array literals the prepared
// statements take.
var (
	TextArray  = textArray
	Int64Array = int64Array
)
