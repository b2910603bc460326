// A JDBC client of the gateway's PostgreSQL listener, as DBeaver and Metabase use the driver:
// the metadata calls a schema browser makes, then a prepared query with a typed parameter.
// Usage: java -cp postgresql.jar:. WireClient.java URL USER PASSWORD
import java.sql.*;

public class WireClient {
    static int count(ResultSet rows) throws SQLException {
        int n = 0;
        try (rows) {
            while (rows.next()) {
                n++;
            }
        }
        return n;
    }

    public static void main(String[] args) throws Exception {
        try (Connection conn = DriverManager.getConnection(args[0], args[1], args[2])) {
            DatabaseMetaData meta = conn.getMetaData();
            System.out.println("product " + meta.getDatabaseProductName() + " " + meta.getDatabaseProductVersion());
            try (ResultSet tables = meta.getTables(null, "public", "%", new String[] {"TABLE"})) {
                while (tables.next()) {
                    System.out.println("table " + tables.getString("TABLE_NAME"));
                }
            }
            try (ResultSet columns = meta.getColumns(null, "public", "people", "%")) {
                while (columns.next()) {
                    System.out.println("column " + columns.getString("COLUMN_NAME") + " " + columns.getString("TYPE_NAME"));
                }
            }
            // What a schema browser asks next: schemas, catalogs, keys and indexes (none here).
            int schemas = count(meta.getSchemas());
            int catalogs = count(meta.getCatalogs());
            int keys = count(meta.getPrimaryKeys(null, "public", "people"));
            int indexes = count(meta.getIndexInfo(null, "public", "people", false, true));
            int imported = count(meta.getImportedKeys(null, "public", "visits"));
            System.out.println("browse " + schemas + " " + catalogs + " " + keys + " " + indexes + " " + imported);
            try (Statement set = conn.createStatement()) {
                set.execute("SET dalenius.epsilon = 0.1");
            }
            try (PreparedStatement query = conn.prepareStatement(
                    "SELECT sex, COUNT(*) AS n FROM people WHERE age > ? GROUP BY sex")) {
                query.setInt(1, 30);
                try (ResultSet rows = query.executeQuery()) {
                    while (rows.next()) {
                        System.out.println("row " + rows.getString("sex") + " " + rows.getLong("n")
                            + " " + rows.getLong("n_low") + " " + rows.getLong("n_high"));
                    }
                }
                SQLWarning warning = query.getWarnings();
                System.out.println("notice " + (warning == null ? "none" : warning.getMessage()));
            }
            try (Statement bad = conn.createStatement()) {
                bad.executeQuery("SELECT COUNT(*) FROM people WHERE agee > 3");
            } catch (SQLException refused) {
                System.out.println("refused " + refused.getSQLState() + " " + refused.getMessage().split("\n")[0]);
            }
        }
    }
}
