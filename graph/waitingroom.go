package graph

import (
	"math"
	"time"

	"seckill/graph/model"
	"seckill/internal/seckill"
)

// Converters of the waiting room (waitingroom.graphqls).

func toWaitingRoom(in *model.WaitingRoomInput) seckill.WaitingRoom {
	if in == nil {
		return seckill.WaitingRoom{}
	}
	return seckill.WaitingRoom{
		OpensBefore:    time.Duration(in.OpensSecondsBefore) * time.Second,
		AdmitPerSecond: int(in.AdmitPerSecond),
		PassFor:        time.Duration(derefInt(in.PassSeconds)) * time.Second,
	}
}

func toGraphWaitingRoom(c *seckill.Campaign) *model.WaitingRoom {
	w := c.Room
	if !w.Enabled() {
		return nil
	}
	return &model.WaitingRoom{ // each bounded well below 2^31 (seckill.ValidateWaitingRoom)
		OpensSecondsBefore: int32(w.OpensBefore / time.Second),
		OpensAt:            c.RoomOpensAt(),
		AdmitPerSecond:     int32(w.AdmitPerSecond),
		PassSeconds:        int32(w.PassFor / time.Second),
	}
}

// clampInt32 shows a count beyond a GraphQL Int as its largest.
func clampInt32(n int64) int32 { return int32(max(math.MinInt32, min(n, math.MaxInt32))) }

func toGraphRoomStatus(st seckill.RoomStatus) (*model.WaitingRoomStatus, error) {
	state, err := toGraphEnum[model.WaitingRoomState](string(st.State), "waiting room state")
	if err != nil {
		return nil, err
	}
	out := &model.WaitingRoomStatus{State: state, Joined: clampInt32(st.Joined), Pass: optional(st.Pass)}
	if st.PlaceKnown {
		place, ahead := clampInt32(st.Place), clampInt32(st.Ahead)
		out.Place, out.Position = &place, &ahead
	}
	switch st.State {
	case seckill.RoomBeforeOpen, seckill.RoomWaiting:
		wait := clampInt32(int64((st.Wait + time.Second - 1) / time.Second))
		at := st.TurnAt.UTC()
		out.EstimatedWaitSeconds, out.TurnAt = &wait, &at
	case seckill.RoomYourTurn, seckill.RoomMissed:
		at := st.TurnAt.UTC()
		out.TurnAt = &at
	}
	if !st.PassExpiresAt.IsZero() {
		exp := st.PassExpiresAt.UTC()
		out.PassExpiresAt = &exp
	}
	return out, nil
}
