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
              NameSnapshot.isSettled(changed: before.changed, now: Self.wallNanoseconds())
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
    /// flushed). Sub-directories changed in the last moments are listed
    /// once their change has settled (one wait: 0.1 s, or 2.1 s on a file
    /// system that keeps times in whole seconds).
    public func recordForRestart() {
        var unsettled: [(byte: Int, changed: Int64)] = []
        for byte in 0..<256 {
            if let changed = recordCurrent(byte) { unsettled.append((byte, changed)) }
        }
        guard let latest = unsettled.map({ $0.changed &+ NameSnapshot.settling(changed: $0.changed) }).max() else { return }
        let wait = min(latest &- Self.wallNanoseconds(), NameSnapshot.coarseSettleNanoseconds)
        if wait > 0 { usleep(useconds_t(wait / 1000)) }
        for (byte, _) in unsettled { _ = recordCurrent(byte) }
    }

    /// Nil when recorded (or nothing to record); else the directory's last
    /// change, too recent to be recorded.
    private func recordCurrent(_ byte: Int) -> Int64? {
        guard let now = stamp(ofSubdirectory: byte) else { return nil }  // no such sub-directory: nothing to list
        if recordedStamps.withLock({ $0[byte] }) == now { return nil }
        let listed = listNames(byte)
        guard !record(listed.names, of: byte, listedAt: listed.before) else { return nil }
        return now.changed
    }

    static func wallNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) &* 1_000_000_000 &+ Int64(now.tv_nsec)
    }
}
