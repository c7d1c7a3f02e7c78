package store

import (
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A pack is how a capture's large values are stored: one column holding
// several sections (a message's headers, links, bodies and raw bytes; a
// request's headers and body), concatenated and compressed with zstd in
// independent chunks of packChunk bytes. Compressed together, a message's
// text body costs little beside the raw message it was decoded from; cut
// into chunks, a value is read a chunk at a time, and a reader of a large
// message holds one chunk of it, never the whole.
//
// The layout, every number an unsigned varint:
//
//	version (packVersion)
//	section count, then for each section its length + 1, or 0 when absent
//	chunk count, then for each chunk its stored length << 1, | 1 when the
//	  chunk is stored as it is (compression did not make it smaller)
//	the chunks, in order
//
// Chunk i holds bytes [i·packChunk, (i+1)·packChunk) of the sections
// concatenated. The format is Go's, around the SQL: the database sees a
// BLOB, so every backend stores and slices it alike.
const (
	packVersion = 1
	packChunk   = 128 << 10
	// packCompressMin is the smallest pack worth compressing. Below it a
	// pack is stored as it is: compressing costs about 6 µs a call
	// whatever the size (BenchmarkPack), most of what a small webhook
	// costs to prepare, to save a few hundred bytes; a message, whose
	// raw bytes and bodies come to kilobytes, is always compressed.
	packCompressMin = 2 << 10
)

// packEncoder and packDecoder are shared: EncodeAll and DecodeAll may be
// called concurrently, each call taking one of a few encoder (decoder)
// states. The fastest level: at ingest every microsecond is a capture's,
// and for mail it compresses nearly as well as the default level. The
// window is one chunk, as chunks are compressed apart: the default (8 MiB)
// made each encoder state keep a history buffer of megabytes for life.
var (
	packEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithWindowSize(packChunk),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(fmt.Sprintf("zstd encoder: %v", err))
		}
		return e
	})
	packDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(packChunk))
		if err != nil {
			panic(fmt.Sprintf("zstd decoder: %v", err))
		}
		return d
	})
)

// packScratch holds the buffers pack gathers a chunk in (at most
// packChunk bytes each, one per concurrent pack).
var packScratch = sync.Pool{New: func() any { return new([]byte) }}

// section is one value of a pack: bytes or text, or absent (a message
// without an HTML body). Text is packed without first being copied to a
// []byte.
type section struct {
	b      []byte
	s      string
	isText bool
	absent bool
}

func bytesSection(b []byte) section { return section{b: b} }

func textSection(s string) section { return section{s: s, isText: true} }

// optionalText is an absent section for nil.
func optionalText(s *string) section {
	if s == nil {
		return section{absent: true}
	}
	return textSection(*s)
}

func (s section) len() int {
	if s.isText {
		return len(s.s)
	}
	return len(s.b)
}

// pack compresses sections into a pack.
func pack(sections ...section) []byte {
	total := 0
	for _, s := range sections {
		total += s.len()
	}
	chunks := (total + packChunk - 1) / packChunk
	head := make([]byte, 0, 2+len(sections)*binary.MaxVarintLen32+chunks*binary.MaxVarintLen32)
	head = binary.AppendUvarint(head, packVersion)
	head = binary.AppendUvarint(head, uint64(len(sections)))
	for _, s := range sections {
		if s.absent {
			head = binary.AppendUvarint(head, 0)
		} else {
			head = binary.AppendUvarint(head, uint64(s.len())+1)
		}
	}
	head = binary.AppendUvarint(head, uint64(chunks))

	if total < packCompressMin {
		// One chunk, stored as it is, with no copy but into the pack.
		out := make([]byte, 0, len(head)+binary.MaxVarintLen32+total)
		out = append(out, head...)
		if chunks > 0 {
			out = binary.AppendUvarint(out, uint64(total)<<1|1)
		}
		for _, s := range sections {
			if s.isText {
				out = append(out, s.s...)
			} else {
				out = append(out, s.b...)
			}
		}
		return out
	}

	enc := packEncoder()
	// A chunk that lies inside one byte section is compressed where it
	// is; one that spans sections, or comes from text, is gathered first,
	// in a buffer kept from one pack to the next: allocating it anew was a
	// sixth of what storing a 2 KiB message allocated.
	gathered := packScratch.Get().(*[]byte)
	defer packScratch.Put(gathered)
	scratch := (*gathered)[:0]
	if cap(scratch) < min(total, packChunk) {
		scratch = make([]byte, 0, min(total, packChunk))
		*gathered = scratch
	}
	body := make([]byte, 0, total/3+64)
	next, within := 0, 0 // the section, and the offset in it, to take from
	for range chunks {
		scratch = scratch[:0]
		var src []byte
		for len(scratch) < packChunk && next < len(sections) {
			s := sections[next]
			n := min(s.len()-within, packChunk-len(scratch))
			if !s.isText && len(scratch) == 0 && (n == packChunk || next == len(sections)-1) {
				src = s.b[within : within+n]
			} else if s.isText {
				scratch = append(scratch, s.s[within:within+n]...)
			} else {
				scratch = append(scratch, s.b[within:within+n]...)
			}
			if within += n; within == s.len() {
				next, within = next+1, 0
			}
			if src != nil {
				break
			}
		}
		if src == nil {
			src = scratch
		}
		start := len(body)
		body = enc.EncodeAll(src, body)
		if stored := len(body) - start; stored < len(src) {
			head = binary.AppendUvarint(head, uint64(stored)<<1)
		} else {
			body = append(body[:start], src...)
			head = binary.AppendUvarint(head, uint64(len(src))<<1|1)
		}
	}
	return append(head, body...)
}

// packHeader is a pack's layout, read from its start.
type packHeader struct {
	sections []packSpan // where each section is in the unpacked bytes
	chunks   []packSpan // where each chunk is in the pack
	stored   []bool     // whether each chunk is stored uncompressed
	total    int64      // the unpacked length
	end      int64      // the stored length
}

type packSpan struct {
	off, len int64
	absent   bool
}

// errShortPack says a pack's header goes on past the bytes given.
var errShortPack = errors.New("pack header cut short")

// maxPackSections bounds what a header may claim, so that a damaged one
// fails instead of allocating.
const maxPackSections = 16

// parsePackHeader reads the header at the start of b, which may be only
// the start of the pack: errShortPack asks for more of it.
func parsePackHeader(b []byte) (packHeader, error) {
	var h packHeader
	pos := 0
	next := func() (uint64, error) {
		v, n := binary.Uvarint(b[pos:])
		switch {
		case n == 0:
			return 0, errShortPack
		case n < 0:
			return 0, errors.New("pack header: bad number")
		}
		pos += n
		return v, nil
	}
	version, err := next()
	if err != nil {
		return h, err
	}
	if version != packVersion {
		return h, fmt.Errorf("pack version %d: not one this version reads", version)
	}
	count, err := next()
	if err != nil {
		return h, err
	}
	if count > maxPackSections {
		return h, fmt.Errorf("pack header: %d sections", count)
	}
	h.sections = make([]packSpan, count)
	for i := range h.sections {
		v, err := next()
		if err != nil {
			return h, err
		}
		if v == 0 {
			h.sections[i] = packSpan{off: h.total, absent: true}
			continue
		}
		h.sections[i] = packSpan{off: h.total, len: int64(v - 1)}
		h.total += int64(v - 1)
	}
	chunks, err := next()
	if err != nil {
		return h, err
	}
	if want := (h.total + packChunk - 1) / packChunk; int64(chunks) != want {
		return h, fmt.Errorf("pack header: %d chunks for %d bytes", chunks, h.total)
	}
	h.chunks = make([]packSpan, chunks)
	h.stored = make([]bool, chunks)
	lens := make([]int64, chunks)
	for i := range lens {
		v, err := next()
		if err != nil {
			return h, err
		}
		lens[i], h.stored[i] = int64(v>>1), v&1 == 1
	}
	h.end = int64(pos)
	for i, n := range lens {
		h.chunks[i] = packSpan{off: h.end, len: n}
		h.end += n
	}
	return h, nil
}

// size is the stored length the header describes.
func (h *packHeader) size() int64 { return h.end }

// chunkLen is how many unpacked bytes chunk i holds.
func (h *packHeader) chunkLen(i int) int64 {
	return min(packChunk, h.total-int64(i)*packChunk)
}

// unpackChunk turns chunk i, its stored bytes in b, into its unpacked bytes
// appended to dst.
func (h *packHeader) unpackChunk(i int, b, dst []byte) ([]byte, error) {
	if h.stored[i] {
		return append(dst, b...), nil
	}
	out, err := packDecoder().DecodeAll(b, dst)
	if err != nil {
		return nil, fmt.Errorf("unpack chunk %d: %w", i, err)
	}
	if int64(len(out)-len(dst)) != h.chunkLen(i) {
		return nil, fmt.Errorf("unpack chunk %d: %d bytes, want %d", i, len(out)-len(dst), h.chunkLen(i))
	}
	return out, nil
}

// unpacked is a whole pack held in memory, read section by section. It
// keeps the chunk it decompressed last: the sections of a small pack all
// come out of its one chunk.
type unpacked struct {
	h      packHeader
	data   []byte
	cached int // the chunk in chunk, or -1
	chunk  []byte
}

func openPack(b []byte) (*unpacked, error) {
	h, err := parsePackHeader(b)
	if err != nil {
		return nil, err
	}
	if h.size() != int64(len(b)) {
		return nil, fmt.Errorf("pack is %d bytes, its header says %d", len(b), h.size())
	}
	return &unpacked{h: h, data: b, cached: -1}, nil
}

// section returns up to limit bytes from the start of section i (limit < 0:
// all of it), and false when the section is absent. Only the chunks that
// hold them are decompressed. What it returns may share memory with the
// pack's decompressed chunk: the caller must not change it.
func (u *unpacked) section(i, limit int) ([]byte, bool, error) {
	if i >= len(u.h.sections) || u.h.sections[i].absent {
		return nil, false, nil
	}
	sp := u.h.sections[i]
	end := sp.off + sp.len
	if limit >= 0 {
		end = min(end, sp.off+int64(limit))
	}
	var out []byte
	for off := sp.off; off < end; {
		c := int(off / packChunk)
		chunk, err := u.chunkAt(c)
		if err != nil {
			return nil, true, err
		}
		base := int64(c) * packChunk
		piece := chunk[off-base : min(int64(len(chunk)), end-base)]
		if out == nil && off+int64(len(piece)) == end {
			return piece, true, nil // within one chunk: no copy
		}
		if out == nil {
			out = make([]byte, 0, end-sp.off)
		}
		out = append(out, piece...)
		off += int64(len(piece))
	}
	if out == nil {
		out = []byte{}
	}
	return out, true, nil
}

// chunkAt decompresses chunk i, or returns it from the cache.
func (u *unpacked) chunkAt(i int) ([]byte, error) {
	if u.cached == i {
		return u.chunk, nil
	}
	c := u.h.chunks[i]
	// A new buffer each time: a section handed out may still point into
	// the last one.
	out, err := u.h.unpackChunk(i, u.data[c.off:c.off+c.len], nil)
	if err != nil {
		u.cached = -1
		return nil, err
	}
	u.cached, u.chunk = i, out
	return out, nil
}

// unpackSections reads whole the sections of a pack that the caller names,
// each nil when absent.
func unpackSections(b []byte, which ...int) ([][]byte, error) {
	u, err := openPack(b)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(which))
	for k, i := range which {
		if out[k], _, err = u.section(i, -1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SQL functions for the migration that packs the captures stored before
// packs existed (0009): capture_pack_message(headers, links, text_body,
// html_body, raw), capture_pack_request(headers, body), capture_pack(data).
func init() {
	register := func(name string, nArgs int32, fn func(args []driver.Value) []byte) {
		registerSQLFunction(name, nArgs, func(args []driver.Value) (driver.Value, error) { return fn(args), nil })
	}
	section := func(v driver.Value) section {
		switch v := v.(type) {
		case string:
			return textSection(v)
		case []byte:
			return bytesSection(v)
		}
		return section{absent: true}
	}
	register("capture_pack_message", 5, func(args []driver.Value) []byte {
		return pack(section(args[0]), section(args[1]), section(args[2]), section(args[3]), section(args[4]))
	})
	register("capture_pack_request", 2, func(args []driver.Value) []byte {
		return pack(section(args[0]), section(args[1]))
	})
	register("capture_pack", 1, func(args []driver.Value) []byte {
		return pack(section(args[0]))
	})
}
