package kfake

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"sort"
)

// offerlog patch 13: the per-batch indexes of sealed segments are a cache.
//
// Upstream keeps a batchMeta (72 bytes) of every batch of every segment in
// memory for as long as the batch is in the log, so a broker's heap grows
// with its log: an hour of offerlog's soak left 382 MB of them in a 548 MB
// heap. With IndexCacheBatches set, the indexes of sealed segments are
// loaded when a request needs them and evicted, oldest loaded first, once
// more than that many batches are loaded; an evicted segment keeps a
// summary (indexSummary) that counting, retention and trimming use
// without reading it again. The active segment's index is always loaded.
// Everything here runs in Cluster.run(), like every other use of the
// index; eviction happens between requests, never while a handler holds a
// *batchMeta.

// indexSummary is what an evicted segment keeps of its index.
type indexSummary struct {
	n               int   // batches
	bytes           int64 // their nbytes
	minMaxTimestamp int64 // the least of their maxTimestamps
	maxMaxTimestamp int64 // the greatest
	end             int64 // the offset after the last batch
	lastMaxEarlier  int64 // the last batch's maxEarlierTimestamp
	firstPos        int64 // the first batch's segPos: those before were trimmed
}

// idxRef names a sealed segment whose index was loaded, with its batch
// count then.
type idxRef struct {
	t    string
	p    int32
	base int64
	n    int
}

// IndexCacheBatches makes the cluster keep the per-batch indexes of at
// most about n batches of sealed segments in memory, reading a segment's
// again from its file when a request needs it (offerlog patch 13). 0, the
// default, keeps every index, as upstream does.
func IndexCacheBatches(n int) Opt {
	return opt{func(c *cfg) { c.indexCacheBatches = n }}
}

// batches returns the number of batches of the segment, evicted or not.
func (si *segmentInfo) batches() int {
	if si.evicted {
		return si.sum.n
	}
	return len(si.index)
}

// lastMaxEarlier returns the maxEarlierTimestamp of the segment's last
// batch; the segment has one.
func (si *segmentInfo) lastMaxEarlier() int64 {
	if si.evicted {
		return si.sum.lastMaxEarlier
	}
	return si.index[len(si.index)-1].maxEarlierTimestamp
}

// batchBytes returns the nbytes of the segment's batches.
func (si *segmentInfo) batchBytes() int64 {
	if si.evicted {
		return si.sum.bytes
	}
	var n int64
	for i := range si.index {
		n += int64(si.index[i].nbytes)
	}
	return n
}

// sealed notes that the index of pd's segment at segIdx, sealed, is
// loaded: it may be evicted.
func (c *Cluster) sealed(pd *partData, segIdx int) {
	if c.cfg.indexCacheBatches <= 0 {
		return
	}
	seg := &pd.segments[segIdx]
	c.idxLoaded = append(c.idxLoaded, idxRef{pd.t, pd.p, seg.base, len(seg.index)})
	c.idxLoadedN += len(seg.index)
}

// evictIndexes evicts the indexes of sealed segments, oldest loaded first,
// until at most IndexCacheBatches batches are loaded. Called between
// requests.
func (c *Cluster) evictIndexes() {
	limit := c.cfg.indexCacheBatches
	for limit > 0 && c.idxLoadedN > limit && len(c.idxLoaded) > 0 {
		ref := c.idxLoaded[0]
		c.idxLoaded[0] = idxRef{}
		c.idxLoaded = c.idxLoaded[1:]
		c.idxLoadedN -= ref.n
		pd, ok := c.data.tps.getp(ref.t, ref.p)
		if !ok {
			continue
		}
		si := sort.Search(len(pd.segments), func(i int) bool { return pd.segments[i].base >= ref.base })
		if si >= len(pd.segments)-1 || pd.segments[si].base != ref.base {
			continue // gone, or the active segment
		}
		pd.segments[si].evict()
	}
	if len(c.idxLoaded) == 0 {
		c.idxLoaded = nil // let the queue's array go
	}
}

// evict drops the sealed segment's index, keeping its summary, and its
// read handle.
func (si *segmentInfo) evict() {
	if si.evicted || len(si.index) == 0 {
		return
	}
	last := &si.index[len(si.index)-1]
	s := indexSummary{
		n:               len(si.index),
		minMaxTimestamp: si.index[0].maxTimestamp,
		maxMaxTimestamp: si.index[0].maxTimestamp,
		end:             last.firstOffset + int64(last.lastOffsetDelta) + 1,
		lastMaxEarlier:  last.maxEarlierTimestamp,
		firstPos:        si.index[0].segPos,
	}
	for i := range si.index {
		m := &si.index[i]
		s.bytes += int64(m.nbytes)
		s.minMaxTimestamp = min(s.minMaxTimestamp, m.maxTimestamp)
		s.maxMaxTimestamp = max(s.maxMaxTimestamp, m.maxTimestamp)
	}
	si.sum, si.evicted, si.index = s, true, nil
	if si.readFile != nil { // a read of it opens it again
		si.readFile.Close()
		si.readFile = nil
	}
}

// ensureIndex loads the index of pd's segment at segIdx if it was
// evicted: its batches from the segment file's headers, less those the log
// start offset had trimmed when it was evicted, each batch's
// maxEarlierTimestamp continued from the segment before
// (rebuildMaxTimestampMeta's). A segment that cannot be read is logged and
// stays evicted: its batches are not served.
func (c *Cluster) ensureIndex(pd *partData, segIdx int) {
	if segIdx < 0 || segIdx >= len(pd.segments) || !pd.segments[segIdx].evicted {
		return
	}
	seg := &pd.segments[segIdx]
	idx, err := c.readSegmentIndex(pd, segIdx)
	if err == nil && len(idx) != seg.sum.n {
		err = fmt.Errorf("%d batches in the file, %d when it was evicted", len(idx), seg.sum.n)
	}
	if err != nil {
		c.cfg.logger.Logf(LogLevelError, "partition %s-%d: segment %d's index not read again: %v", pd.t, pd.p, seg.base, err)
		return
	}
	running, first := int64(0), true
	if segIdx > 0 && pd.segments[segIdx-1].batches() > 0 {
		running, first = pd.segments[segIdx-1].lastMaxEarlier(), false
	}
	for i := range idx {
		if first || idx[i].maxTimestamp > running {
			running = idx[i].maxTimestamp
		}
		first = false
		idx[i].maxEarlierTimestamp = running
	}
	seg.index, seg.evicted, seg.sum = idx, false, indexSummary{}
	c.sealed(pd, segIdx)
}

// ensureAllIndexes loads every evicted index of pd (for the requests that
// walk a partition's every batch: compaction, share groups), and reports
// whether every one is loaded.
func (c *Cluster) ensureAllIndexes(pd *partData) bool {
	all := true
	for si := range pd.segments {
		if c.ensureIndex(pd, si); pd.segments[si].evicted {
			all = false
		}
	}
	return all
}

// readSegmentIndex reads the index of a sealed segment of pd from its
// file: the batches' headers (as indexSegment does) through a buffer, and
// their epochs and transaction flags from its .idx file. The batches
// before the one the index began with when evicted (trimLeft's) are left
// out.
func (c *Cluster) readSegmentIndex(pd *partData, segIdx int) ([]batchMeta, error) {
	seg := &pd.segments[segIdx]
	pdir := partDir(c.storageDir, pd.t, pd.p)
	f, err := c.segReadFile(pd, segIdx)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	// The file's size: a load's full replay leaves seg.size 0 for
	// sealed segments.
	info, err := c.fs.Stat(filepath.Join(pdir, segmentFileName(seg.base)))
	if err != nil {
		return nil, err
	}
	size := info.Size()
	idxRaw, _ := c.fs.ReadFile(filepath.Join(pdir, indexFileName(seg.base)))
	r := bufio.NewReaderSize(f, 256<<10)
	idx := make([]batchMeta, 0, seg.sum.n)
	const header = batchHeaderSize
	var h [header]byte
	for pos, batchIdx := int64(0), 0; pos < size; batchIdx++ {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return nil, fmt.Errorf("batch header at %d: %w", pos, err)
		}
		batchSize := 12 + int64(binary.BigEndian.Uint32(h[8:12]))
		if batchSize < header || pos+batchSize > size {
			return nil, fmt.Errorf("batch at %d of %d bytes past the segment's %d", pos, batchSize, size)
		}
		if _, err := r.Discard(int(batchSize - header)); err != nil {
			return nil, fmt.Errorf("batch at %d: %w", pos, err)
		}
		m := headerMeta(h[:], pos, batchSize, idxRaw, batchIdx)
		pos += batchSize
		if m.segPos < seg.sum.firstPos {
			continue // trimmed
		}
		idx = append(idx, m)
	}
	return idx, nil
}

// searchOffset is pd.searchOffset with the segments it looks into loaded:
// the one that holds o, and the one whose batch it returns.
func (c *Cluster) searchOffset(pd *partData, o int64) (segIdx, metaIdx int, found, atEnd bool) {
	if c.cfg.indexCacheBatches > 0 && len(pd.segments) > 0 {
		si := max(sort.Search(len(pd.segments), func(i int) bool { return pd.segments[i].base > o })-1, 0)
		c.ensureIndex(pd, si)
	}
	segIdx, metaIdx, found, atEnd = pd.searchOffset(o)
	if found {
		if c.ensureIndex(pd, segIdx); pd.segments[segIdx].evicted {
			return 0, 0, false, false // not read: not served
		}
	}
	return segIdx, metaIdx, found, atEnd
}

// findEpochBatch returns the first batch of pd whose epoch is at least
// epoch, or (-1, -1, nil) (pd.findBatchMeta by epoch), with the segments
// it and the batch before it are in loaded: the segment is found by its
// maxEpoch, which its last batch has (epochs never fall along the log),
// so an evicted segment needs no reading to be passed over.
func (c *Cluster) findEpochBatch(pd *partData, epoch int32) (segIdx, metaIdx int, meta *batchMeta) {
	si := sort.Search(len(pd.segments), func(i int) bool {
		return pd.segments[i].batches() > 0 && pd.segments[i].maxEpoch >= epoch
	})
	if si >= len(pd.segments) {
		return -1, -1, nil
	}
	c.ensureIndex(pd, si)
	c.ensureIndex(pd, si-1)
	seg := &pd.segments[si]
	mi := sort.Search(len(seg.index), func(i int) bool { return seg.index[i].epoch >= epoch })
	if mi >= len(seg.index) || mi == 0 && si > 0 && pd.segments[si-1].evicted {
		return -1, -1, nil // not read: not answered
	}
	return si, mi, &seg.index[mi]
}
