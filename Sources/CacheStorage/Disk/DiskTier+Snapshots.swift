import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Sub-directories' names recorded for the next start (`NameSnapshot`):
/// written by the start-up rebuild after it lists a sub-directory and, for
/// the ones changed since, when the process stops (`recordForRestart`);
/// read by a lookup that comes before the rebuild.
extension DiskTier {
    var snapshotDirectory: String { directory + "/names" }

    private func snapshotPath(_ byte: Int) -> String { snapshotDirectory + "/" + Self.subdirectory(byte) }

    func stamp(ofSubdirectory byte: Int) -> NameSnapshot.Stamp? { try? stampOrError(byte) }

    private func stampOrError(_ byte: Int) throws(Errno) -> NameSnapshot.Stamp {
        try DiskIO.stamp(ofDirectory: directory + "/" + Self.subdirectory(byte))
    }

    /// The sub-directory's names from its snapshot, when that still
    /// describes it (none when there is no such directory); nil when there
    /// is no snapshot or the directory changed since.
    func snapshotNames(_ byte: Int) -> [FileName]? {
        let now: NameSnapshot.Stamp
        do throws(Errno) {
            now = try stampOrError(byte)
        } catch {
            // Nothing stored there yet (what this process stores is indexed).
            return error == .noSuchFileOrDirectory ? [] : nil
        }
        guard let bytes = DiskIO.readSmallFile(snapshotPath(byte),
                                               limit: NameSnapshot.headerBytes + NameSnapshot.maxNames * 16 + 4),
              let snapshot = bytes.withUnsafeBytes({ NameSnapshot(decoding: $0) }), snapshot.stamp == now else { return nil }
        recordedStamps.withLock { $0[byte] = now }
        return snapshot.names
    }

    /// The sub-directory listed (counted in `listings`), with its stamp from
    /// before the listing (for `record`).
    func listNames(_ byte: Int) -> (listing: [String], names: [FileName], before: NameSnapshot.Stamp?) {
        let before = stamp(ofSubdirectory: byte)
        listings.add(1, ordering: .relaxed)
        let listing = listFiles(subdirectory: Self.subdirectory(byte))
        return (listing, listing.compactMap(FileName.init), before)
    }

    /// Records `names`, listed when the directory's stamp was `before`,
    /// if it still is and is settled. False when not recorded.
    @discardableResult
    func record(_ names: [FileName], of byte: Int, listedAt before: NameSnapshot.Stamp?) -> Bool {
        guard let before, stamp(ofSubdirectory: byte) == before,
              NameSnapshot.isSettled(changed: before.seconds &* 1_000_000_000 &+ before.nanoseconds, now: Self.wallNanoseconds())
        else { return false }
        let bytes = NameSnapshot(stamp: before, names: names).encoded()
        return snapshotWrites.withLock { _ in
            let path = snapshotPath(byte), temporary = snapshotDirectory + "/.tmp-" + Self.subdirectory(byte)
            do throws(Errno) {
                try DiskIO.makeDirectory(snapshotDirectory)
                try? DiskIO.remove(temporary)
                let fd = try DiskIO.createExclusive(temporary)
                defer { DiskIO.close(fd) }
                let written = bytes.withUnsafeBytes { raw in Result { () throws(Errno) in try DiskIO.writeAll(fd, raw) } }
                try written.get()
                try DiskIO.rename(temporary, to: path)
            } catch {
                // Only a slower next start: the directory is listed then.
                try? DiskIO.remove(temporary)
                return false
            }
            recordedStamps.withLock { $0[byte] = before }
            return true
        }
    }

    /// Records every sub-directory changed since its snapshot, so that the
    /// next start's first lookups list none (at a stop, after the writes are
    /// flushed). A sub-directory changed in the last moments is listed after
    /// waiting for its change to settle (once, `NameSnapshot.settleNanoseconds`).
    public func recordForRestart() {
        var unsettled: [Int] = []
        for byte in 0..<256 where !recordCurrent(byte) { unsettled.append(byte) }
        guard !unsettled.isEmpty else { return }
        usleep(useconds_t(NameSnapshot.settleNanoseconds / 1000))
        for byte in unsettled { _ = recordCurrent(byte) }
    }

    /// False when the sub-directory changed too recently (or while it was listed) to be recorded.
    private func recordCurrent(_ byte: Int) -> Bool {
        guard let now = stamp(ofSubdirectory: byte) else { return true }  // no such sub-directory: nothing to list
        if recordedStamps.withLock({ $0[byte] }) == now { return true }
        let listed = listNames(byte)
        return record(listed.names, of: byte, listedAt: listed.before)
    }

    static func wallNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) &* 1_000_000_000 &+ Int64(now.tv_nsec)
    }
}
