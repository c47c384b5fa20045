package dynamostore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// The counter items (issue 44). A rule and key has one item,
// "lim#<rule>#<key>", and each of its counters (ledger.Counters: the
// counter named by window k counts windows k-1 and k) is an attribute of
// it named by the start of window k, in Unix seconds. An admission in
// window k reads and adds to the attributes of windows k and k+1, in one
// update of the item conditioned on both holding less than the cap.
//
// What stays in the item: a worker whose clock is behind by up to
// max(window, skewFloor) still reads its window's counters, so the
// attributes of windows k-back to k+1 are kept (back is 1 for a window of
// skewFloor or more: four attributes at most); every admission removes
// those below, over a span that covers any gap since the item's last
// write: the item's TTL is that write's time plus horizon, and an admission
// is conditioned on the TTL being ahead. An admission that finds it passed
// (the item outlived its TTL: DynamoDB deletes expired items lazily) is
// tried again with every stale attribute the item holds removed, on the
// condition that its TTL is still the one read (replan). So the item never
// holds more than the counters a worker may read, whatever the traffic.
//
// A release takes one from exactly the attributes the marker names, those
// that are still there: an attribute removed as stale is one no worker
// reads, so nothing is owed to it.

const (
	counterItemPrefix = "lim#"
	// skewFloor is the least clock skew between workers an item tolerates:
	// a counter stays at least this long after its window ended (30 s is
	// the default expiry margin, which covers the same skew).
	skewFloor = 30 * time.Second
	// horizonWindows is how many windows past back an item outlives its
	// last admission.
	horizonWindows = 3
)

func counterPK(c ledger.Count) string {
	return counterItemPrefix + string(c.Rule) + "#" + c.Key
}

// back is how many windows before its own an admission keeps: enough for a
// worker whose clock is skewFloor (or a window) behind.
func back(w time.Duration) int64 {
	return int64((max(w, skewFloor) + w - 1) / w)
}

// horizon is how long an item outlives an admission of a count of cap c.
func horizon(c ledger.Cap) time.Duration {
	return time.Duration(back(c.Window)+horizonWindows) * c.Window
}

// keepFrom is the start of the oldest window an admission at now keeps.
func keepFrom(c ledger.Cap, now time.Time) time.Time {
	return ledger.WindowStart(c, now).Add(-time.Duration(back(c.Window)) * c.Window)
}

func windowName(prefix string, start time.Time) string {
	return prefix + strconv.FormatInt(start.Unix(), 10)
}

// counterItem is what an admission does to one counter item.
type counterItem struct {
	pk string
	// kept are the counts the item keeps, with their attribute prefix: ""
	// for the item's own rule and key, the region for an SMS country cap
	// kept in the global cap's item.
	kept []keptCount
	// cells are the counters the admission counts in: two per kept count.
	cells []cell
	// stale are the attribute names the admission removes.
	stale []string
	// ttl is the item's TTL after the admission.
	ttl time.Time
	// expired is, when set, the TTL (a number) of an item that outlived it:
	// the admission is conditioned on the TTL being this, not ahead.
	expired string
}

type keptCount struct {
	count  int
	prefix string
}

// cell is one counter an admission counts in: an attribute of its item.
type cell struct {
	count int
	attr  string
	from  time.Time // ledger.Counter.From
}

// counterItems plans an admission of counts at now: one counterItem per
// item, in the order of their first count. An SMS country cap of a shared
// region (ShareSMSCaps) goes into the global cap's item when both count
// and both windows are at least skewFloor (which keeps the item's
// attributes few).
func (l *Limits) counterItems(counts []ledger.Count, now time.Time) []*counterItem {
	global := -1
	for i, c := range counts {
		if c.Rule == ledger.RuleSMSGlobal && c.Cap.Window >= skewFloor {
			global = i
		}
	}
	byPK := map[string]*counterItem{}
	var items []*counterItem
	for i, c := range counts {
		pk, prefix := counterPK(c), ""
		if c.Rule == ledger.RuleSMSCountryCap && global >= 0 && l.shared[c.Key] && c.Cap.Window >= skewFloor {
			pk, prefix = counterPK(counts[global]), c.Key
		}
		it := byPK[pk]
		if it == nil {
			it = &counterItem{pk: pk}
			byPK[pk] = it
			items = append(items, it)
		}
		it.kept = append(it.kept, keptCount{i, prefix})
		for _, ctr := range ledger.Counters(c, now) {
			it.cells = append(it.cells, cell{i, windowName(prefix, ctr.From.Add(c.Cap.Window)), ctr.From})
		}
	}
	for _, it := range items {
		it.plan(l, counts, now)
	}
	return items
}

// plan sets the item's TTL and the stale attributes an admission at now
// removes: for each kept count (and, with a shared region, every shared
// region), the windows below keepFrom over a span that covers the item's
// horizon and two windows of skew.
func (it *counterItem) plan(l *Limits, counts []ledger.Count, now time.Time) {
	var h time.Duration
	for _, k := range it.kept {
		h = max(h, horizon(counts[k.count].Cap))
	}
	it.ttl, it.stale, it.expired = now.Add(h), nil, ""
	for _, k := range it.kept {
		c := counts[k.count].Cap
		prefixes := []string{k.prefix}
		if k.prefix != "" {
			prefixes = slices.Sorted(func(yield func(string) bool) {
				for r := range l.shared {
					if !yield(r) {
						return
					}
				}
			})
		}
		from := keepFrom(c, now)
		span := int64((h+c.Window-1)/c.Window) + 2
		for _, p := range prefixes {
			for j := int64(1); j <= span; j++ {
				it.stale = append(it.stale, windowName(p, from.Add(-time.Duration(j)*c.Window)))
			}
		}
	}
}

// admitUpdate is the item's update in an admission: its cells each below
// their cap and the item's TTL ahead (or, replanned, the TTL it was read
// with); one added to each cell, the stale attributes removed, the TTL set.
func (l *Limits) admitUpdate(it *counterItem, counts []ledger.Count, now time.Time) *types.Update {
	names := map[string]string{"#ttl": AttrTTL}
	values := map[string]types.AttributeValue{":one": n(1), ":ttl": n(it.ttl.Unix())}
	cond := []string{"(attribute_not_exists(#ttl) OR #ttl > :now)"}
	values[":now"] = n(now.Unix())
	if it.expired != "" {
		delete(values, ":now")
		cond[0] = "#ttl = :was"
		values[":was"] = &types.AttributeValueMemberN{Value: it.expired}
	}
	add := make([]string, 0, len(it.cells))
	for j, c := range it.cells {
		a, m := fmt.Sprintf("#c%d", j), fmt.Sprintf(":max%d", c.count)
		names[a], values[m] = c.attr, n(int64(counts[c.count].Cap.Max))
		cond = append(cond, fmt.Sprintf("(attribute_not_exists(%s) OR %s < %s)", a, a, m))
		add = append(add, a+" :one")
	}
	expr := "SET #ttl = :ttl ADD " + strings.Join(add, ", ")
	if len(it.stale) > 0 {
		rm := make([]string, len(it.stale))
		for j, name := range it.stale {
			rm[j] = fmt.Sprintf("#r%d", j)
			names[rm[j]] = name
		}
		expr += " REMOVE " + strings.Join(rm, ", ")
	}
	return &types.Update{
		TableName:                           &l.table,
		Key:                                 map[string]types.AttributeValue{AttrPK: s(it.pk)},
		UpdateExpression:                    aws.String(expr),
		ConditionExpression:                 aws.String(strings.Join(cond, " AND ")),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// replan reads the item as a failed admission found it (old) and reports
// whether the failure may have been the TTL's rather than a full
// counter's: then the item is planned again, and if its TTL has passed,
// with every stale attribute it holds removed, conditioned on that TTL.
func (it *counterItem) replan(l *Limits, counts []ledger.Count, old map[string]types.AttributeValue, now time.Time) bool {
	was, has := old[AttrTTL].(*types.AttributeValueMemberN)
	expired := has && numberOf(was) <= now.Unix()
	switch {
	case it.expired == "" && !expired:
		return false // the TTL was ahead: a counter is full
	case it.expired != "" && has && was.Value == it.expired:
		return false // the TTL was the one read: a counter is full
	}
	it.plan(l, counts, now)
	if expired {
		it.expired = was.Value
		it.stale = it.staleIn(l, counts, old, now)
	}
	return true
}

// staleIn lists every attribute of the item old that no worker reads at
// now, with the planned stale names: a window attribute of a kept count (or
// of a shared region, judged by the kept country cap) below keepFrom, and
// any window attribute of a prefix no kept count reads.
func (it *counterItem) staleIn(l *Limits, counts []ledger.Count, old map[string]types.AttributeValue, now time.Time) []string {
	capOf := map[string]ledger.Cap{}
	for _, k := range it.kept {
		capOf[k.prefix] = counts[k.count].Cap
		if k.prefix != "" {
			for r := range l.shared {
				capOf[r] = counts[k.count].Cap
			}
		}
	}
	out := slices.Clone(it.stale)
	for name := range old {
		i := strings.IndexFunc(name, func(r rune) bool { return r >= '0' && r <= '9' })
		if i < 0 || name == AttrPK || name == AttrTTL {
			continue
		}
		start, err := strconv.ParseInt(name[i:], 10, 64)
		if err != nil {
			continue
		}
		c, read := capOf[name[:i]]
		if !read || time.Unix(start, 0).Before(keepFrom(c, now)) {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}
