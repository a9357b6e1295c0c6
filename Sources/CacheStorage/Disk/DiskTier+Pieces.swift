import CacheSemantics
import FoundationEssentials

/// Several pieces (206 answers) of one variant on disk, as in memory, so a
/// player's seeks stay hits after a restart or an eviction from memory.
///
/// A whole response's file is named by its key and variant, as always. A
/// piece's name shares the variant number's high 48 bits and puts in the
/// low 16 a slot drawn from where it starts (never the whole's own low
/// bits). The writer thread, once a file is in place, drops the other
/// files of its variant that it replaces: every one for a whole response;
/// for a piece, the whole and the pieces not of its representation
/// (another complete length or strong ETag) or not apart from it (pieces
/// that touch were joined before the store), then the oldest beyond
/// `PartialContent.maxPiecesPerVariant`.
extension DiskTier {
    static let pieceSlotBits: UInt64 = 0xFFFF

    /// The name of the file holding `key`'s whole response for the variant with `varyValues`.
    static func fileName(_ key: String, varyValues: [String?]) -> FileName {
        FileName(key: keyHashValue(key), variant: variantHashValue(varyValues))
    }

    /// The name of the file holding `head`'s response.
    static func fileName(_ head: StoredHead) -> FileName {
        let whole = fileName(head.key, varyValues: head.varyValues)
        guard let piece = StoredPiece(head) else { return whole }
        var slot = ((UInt64(piece.piece.first) &+ 1) &* 0x9E37_79B9_7F4A_7C15) >> 48
        if slot == whole.variant & pieceSlotBits { slot ^= 1 }
        return FileName(key: whole.key, variant: whole.variant & ~pieceSlotBits | slot)
    }

    /// What a stored 206 holds and of which representation.
    struct StoredPiece {
        let piece: PartialContent.Piece
        let etag: String?

        init?(_ head: StoredHead) {
            guard head.status == 206, let piece = PartialContent.piece(contentRange: head.field("content-range")) else { return nil }
            self.piece = piece
            etag = head.field("etag")
        }
    }

    /// Drops the files `name` (just indexed, holding `head`) replaces among
    /// its variant's (writer thread).
    func dropReplacedSiblings(of name: FileName, head: StoredHead) {
        let whole = Self.fileName(head.key, varyValues: head.varyValues)
        let group = whole.variant & ~Self.pieceSlotBits
        guard let stored = files.variants(of: head.key) else { return }
        let siblings = stored.filter { $0.name != name && $0.name.variant & ~Self.pieceSlotBits == group }
        guard !siblings.isEmpty else { return }
        var dropped: [FileName] = []
        var kept: [(name: FileName, storedAt: Int64)] = []
        if let new = StoredPiece(head) {
            for sibling in siblings {
                // The whole response is replaced by a newer piece, as in memory.
                guard sibling.name != whole, let old = storedPiece(sibling.name),
                      PartialContent.staysBeside(new.piece, etag: new.etag, stored: old.piece, etag: old.etag)
                else {
                    dropped.append(sibling.name)
                    continue
                }
                kept.append((sibling.name, sibling.item.storedAt))
            }
            let excess = kept.count + 1 - PartialContent.maxPiecesPerVariant
            if excess > 0 { dropped += kept.sorted { $0.storedAt < $1.storedAt }.prefix(excess).map(\.name) }
        } else {
            dropped = siblings.map(\.name)
        }
        for old in dropped {
            guard state.withLock({ $0.remove(key: head.key, name: old) }) else { continue }
            try? DiskIO.remove(path(of: old))
        }
    }

    /// The piece a stored file holds (its head read: writer thread); nil
    /// for a whole response or an unreadable file.
    func storedPiece(_ name: FileName) -> StoredPiece? {
        guard let fd = try? DiskIO.openForReading(path(of: name)) else { return nil }
        defer { DiskIO.close(fd) }
        return readHead(fd).flatMap { StoredPiece($0.record.head) }
    }
}

extension StoredHead {
    /// The first value of a stored field (lowercased name).
    func field(_ name: String) -> String? {
        headPrefix.withUnsafeBytes { HeadFields.first(name, in: $0) } ?? otherFields.first { $0.name == name }?.value
    }
}
