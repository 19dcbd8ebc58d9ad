package scheduler

// queue is a double-ended FIFO of sequences on a ring buffer: admission takes
// from the front, new requests join the back, preempted sequences go back to
// the front. It grows by doubling and never shrinks, so the steady state
// allocates nothing.
type queue struct {
	items []*Sequence // len is the capacity, a power of two
	head  int
	n     int
}

func (q *queue) len() int { return q.n }

func (q *queue) at(i int) *Sequence { return q.items[(q.head+i)&(len(q.items)-1)] }

func (q *queue) front() *Sequence { return q.at(0) }

func (q *queue) grow() {
	if q.n < len(q.items) {
		return
	}
	items := make([]*Sequence, max(16, 2*len(q.items)))
	for i := range q.n {
		items[i] = q.at(i)
	}
	q.items, q.head = items, 0
}

func (q *queue) pushBack(s *Sequence) {
	q.grow()
	q.items[(q.head+q.n)&(len(q.items)-1)] = s
	q.n++
}

func (q *queue) pushFront(s *Sequence) {
	q.grow()
	q.head = (q.head - 1) & (len(q.items) - 1)
	q.items[q.head] = s
	q.n++
}

func (q *queue) popFront() *Sequence {
	s := q.items[q.head]
	q.items[q.head] = nil
	q.head = (q.head + 1) & (len(q.items) - 1)
	q.n--
	return s
}

// remove deletes s, keeping the order of the others; it reports whether s
// was there. O(n), used only for aborts of waiting sequences.
func (q *queue) remove(s *Sequence) bool {
	for i := range q.n {
		if q.at(i) != s {
			continue
		}
		for j := i; j < q.n-1; j++ {
			q.items[(q.head+j)&(len(q.items)-1)] = q.at(j + 1)
		}
		q.items[(q.head+q.n-1)&(len(q.items)-1)] = nil
		q.n--
		return true
	}
	return false
}
