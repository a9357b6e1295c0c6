/// Kept descriptors given back when the process runs short of them.
extension DiskFiles {
    /// Closes up to `count` kept files (each as soon as no hit still reads
    /// it) and keeps no more than are left from now on: an accept or an
    /// open that failed for want of a descriptor gets them. Returns how
    /// many entries let theirs go.
    func releaseKept(_ count: Int) -> Int {
        var chosen: [(key: String, name: FileName)] = []
        forEach { key, files in
            for (name, item) in files where item.kept != nil && chosen.count < count { chosen.append((key, name)) }
        }
        var released = 0
        for (key, name) in chosen {
            withFiles(of: key) { files in
                files?.modify(name) { item in
                    guard item.kept != nil else { return }
                    item.kept = nil
                    released += 1
                }
            }
        }
        let left = kept.value.load(ordering: .relaxed)
        if left < keepLimit.load(ordering: .relaxed) { keepLimit.store(left, ordering: .relaxed) }
        return released
    }
}
