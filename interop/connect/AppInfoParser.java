package org.apache.kafka.common.utils;

/**
 * A bridge for connect-file 4.3.1 on the 4.4 runtime (Maven Central has no connect-file 4.4.0, see
 * interop/maven.sh): its connectors' version() calls org.apache.kafka.common.utils.AppInfoParser, which
 * kafka-clients 4.4 moved to ...utils.internals. Without this, the REST API's PUT /connectors/NAME/config
 * answers 500 (NoClassDefFoundError). interop/jvm_apps.py puts it first on Connect's class path.
 */
public final class AppInfoParser {
    private AppInfoParser() { }

    public static String getVersion() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getVersion();
    }

    public static String getCommitId() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getCommitId();
    }
}
