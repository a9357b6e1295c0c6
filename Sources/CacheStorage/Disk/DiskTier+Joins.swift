import CacheSemantics
import FoundationEssentials
import SystemPackage

/// Pieces of one representation joined on disk (RFC 9111 section 3.4).
///
/// A piece too large for memory streams straight to its file, so the
/// worker cannot join it with the pieces it touches as it does in memory;
/// the writer thread does, once the file is in place: the bytes of the
/// stored piece that the new one lacks are copied around the new one's
/// into a file of their own (the new response's fields, the joined
/// Content-Range, or a 200 once it is the whole), and both files go. Only
/// pieces of the same complete length and strong ETag join: a piece of
/// another version is replaced, never spliced in. The faster tiers forget
/// the key then (`whenPiecesJoin`): a piece they hold would hide the
/// joined one.
extension DiskTier {
    /// Joins the piece just sealed as `name` (`head`) with those of its
    /// variant it touches, one after another: the file and head that
    /// stand for it then (its own when nothing joined), or nil when a
    /// removal of the key won meanwhile. Writer thread.
    func joinTouchingPieces(_ name: FileName, head: StoredHead, storedAt: Int64, seq: UInt64) -> (FileName, StoredHead)? {
        var (name, head) = (name, head)
        var joinedAny = false
        defer { if joinedAny { piecesJoined.withLock { $0 }?(head.key) } }
        // Bounded: each join removes a sibling, and a variant keeps few.
        for _ in 0..<PartialContent.maxPiecesPerVariant {
            guard let new = StoredPiece(head), let sibling = touchingSibling(of: name, head: head, new) else { break }
            guard let joined = join(name, head: head, new, with: sibling, storedAt: storedAt, seq: seq) else {
                // Not written (the file stands as it is), or refused: a removal won.
                return files.variants(of: head.key)?.contains(where: { $0.name == name }) == true ? (name, head) : nil
            }
            if joined.0 != name || joined.1 != head { joinedAny = true }
            (name, head) = joined
        }
        return (name, head)
    }

    /// A stored piece of `head`'s variant, other than `name`, that `new`
    /// may join (the same representation, overlapping or touching).
    private func touchingSibling(of name: FileName, head: StoredHead, _ new: StoredPiece) -> (name: FileName, piece: StoredPiece)? {
        let group = Self.fileName(head.key, varyValues: head.varyValues).variant & ~Self.pieceSlotBits
        guard let stored = files.variants(of: head.key) else { return nil }
        for sibling in stored where sibling.name != name && sibling.name.variant & ~Self.pieceSlotBits == group {
            // (A piece the new one holds all of adds nothing: it is dropped
            // with the replaced ones. A join larger than the tier stores is
            // not made: the new piece replaces the old.)
            guard let old = storedPiece(sibling.name),
                  PartialContent.mayJoin(old.piece, etag: old.etag, new.piece, etag: new.etag) else { continue }
            let joined = PartialContent.joined(old.piece, new.piece)
            guard joined != new.piece, joined.count <= maxObjectBytes else { continue }
            return (sibling.name, old)
        }
        return nil
    }

    /// Writes the file of `new` (in `name`) joined with the sibling's
    /// bytes outside it, indexes it and removes the two it replaces. Nil
    /// when it could not (logged) or a removal of the key won meanwhile;
    /// `name` and `head` as they were when the sibling's file is corrupt
    /// (it is dropped).
    private func join(_ name: FileName, head: StoredHead, _ new: StoredPiece, with sibling: (name: FileName, piece: StoredPiece),
                      storedAt: Int64, seq: UInt64) -> (FileName, StoredHead)? {
        guard let newBody = body(of: name, key: head.key), newBody.length == new.piece.count else { return nil }
        guard let oldBody = body(of: sibling.name, key: head.key), oldBody.length == sibling.piece.piece.count else {
            // Unreadable: dropped, and the new piece looks further.
            forget(sibling.name, key: head.key)
            return (name, head)
        }
        let (old, piece) = (sibling.piece.piece, new.piece)
        let whole = PartialContent.joined(old, piece)
        // The stored piece's bytes before the new one, the new one, the stored piece's after it.
        var bodies: [FileBody] = []
        if old.first < piece.first { bodies.append(oldBody.slice(from: 0, count: piece.first - old.first)) }
        bodies.append(newBody)
        if old.last > piece.last { bodies.append(oldBody.slice(from: piece.last + 1 - old.first, count: old.last - piece.last)) }
        let joinedHead = head.holding(whole)
        let joinedName = Self.fileName(joinedHead)
        let record = DiskRecord(head: joinedHead, storedAt: storedAt, body: [])
        guard let fileBytes = writeInPlace(record, bodies: bodies, as: joinedName) else { return nil }
        guard indexSealed(key: head.key, name: joinedName, fileBytes: fileBytes, storedAt: storedAt, tags: joinedHead.tags, seq: seq,
                          verified: true)
        else { return nil }
        for replaced in [name, sibling.name] where replaced != joinedName { forget(replaced, key: head.key) }
        return (joinedName, joinedHead)
    }

    /// The body of a stored file (its checksum checked first, unless it
    /// was already), or nil (a corrupt file, logged).
    private func body(of name: FileName, key: String) -> FileBody? {
        guard let file = StoredFile(opening: path(of: name)), let read = readHead(file.fd) else { return nil }
        if !files.isVerified(key, name), let failure = bodyChecksumFailure(file.fd, header: read.header, meta: read.meta) {
            fault("corrupt", "dropping cache file \(path(of: name)): \(failure)")
            return nil
        }
        return FileBody(file: file, offset: DiskFormat.fixedHeaderBytes + read.header.metaLength, length: read.header.bodyLength)
    }

    /// Drops a file from the index and the disk.
    private func forget(_ name: FileName, key: String) {
        guard state.withLock({ $0.remove(key: key, name: name) }) else { return }
        try? DiskIO.remove(path(of: name))
    }
}

extension FileBody {
    /// `count` bytes of this body from `offset` in it.
    public func slice(from offset: Int, count: Int) -> FileBody {
        FileBody(file: file, offset: self.offset + offset, length: count)
    }
}
