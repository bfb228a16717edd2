package pgtransport

import "github.com/jackc/pgx/v5/pgtype"

// Array parameters without an allocation per element. pgx passes a
// []string or []int64 through its FlatArray, whose Index returns each
// element as an interface value: an allocation for every string, and for
// every integer past 255. A hand-off sends its assignment's id, slot and
// body, its DONE's id and body and the id again to delete the finished
// row, each an element of such an array (about seven allocations a
// hand-off). textArray and int8Array hand out pointer-shaped references to
// their elements instead, which an interface holds as they are; pgx
// encodes them through pgtype.TextValuer and pgtype.Int64Valuer, to the
// same bytes. A nil slice is NULL, an empty one an empty array, as with
// pgx's own.

// textArray is a text[] parameter.
type textArray []string

func (a textArray) Dimensions() []pgtype.ArrayDimension {
	if a == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

func (a textArray) Index(i int) any { return textRef{&a[i]} }

func (a textArray) IndexType() any { return textRef{} }

// textRef is an element of a textArray.
type textRef struct{ s *string }

func (r textRef) TextValue() (pgtype.Text, error) { return pgtype.Text{String: *r.s, Valid: true}, nil }

// int8Array is a bigint[] parameter.
type int8Array []int64

func (a int8Array) Dimensions() []pgtype.ArrayDimension {
	if a == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

func (a int8Array) Index(i int) any { return int8Ref{&a[i]} }

func (a int8Array) IndexType() any { return int8Ref{} }

// int8Ref is an element of an int8Array.
type int8Ref struct{ n *int64 }

func (r int8Ref) Int64Value() (pgtype.Int8, error) { return pgtype.Int8{Int64: *r.n, Valid: true}, nil }
