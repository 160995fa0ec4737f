package dev.glimmer.kernels;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads kernel signatures and argument structs out of .metal source text. The kernels follow one
 * convention (a parameter per binding, each with an attribute), so a few patterns suffice; anything
 * else is rejected with the kernel and parameter named.
 */
public final class KernelParser {

    private static final Pattern KERNEL = Pattern.compile("\\bkernel\\s+void\\s+(\\w+)\\s*\\(");
    private static final Pattern PARAM = Pattern.compile(
            "(?s)\\s*(.+?)\\s*\\b(\\w+)\\s*(?:\\[\\[\\s*(\\w+)\\s*(?:\\(\\s*(\\d+)\\s*\\))?\\s*\\]\\]|TG_MEM\\(\\s*(\\d+)\\s*\\))\\s*");
    private static final Pattern STRUCT = Pattern.compile("\\bstruct\\s+(\\w+Args)\\s*\\{([^}]*)\\}\\s*;");
    private static final Pattern FIELD = Pattern.compile("\\s*(\\w+)\\s+(\\w+)\\s*");

    private KernelParser() {}

    /** Every {@code kernel void NAME(...)} in {@code source}, in order. */
    public static List<KernelSignature> kernels(String source) {
        String text = stripComments(source);
        List<KernelSignature> out = new ArrayList<>();
        Matcher m = KERNEL.matcher(text);
        while (m.find()) {
            String name = m.group(1);
            // attributes hold parentheses too: the parameter list ends at the ')' of depth 0
            int depth = 1;
            int i = m.end();
            for (; i < text.length() && depth > 0; i++) {
                char c = text.charAt(i);
                if (c == '(') {
                    depth++;
                } else if (c == ')') {
                    depth--;
                }
            }
            int end = i - 1;
            List<KernelParam> params = new ArrayList<>();
            for (String p : splitTopLevel(text.substring(m.end(), end))) {
                params.add(param(name, p));
            }
            out.add(new KernelSignature(name, params));
        }
        return out;
    }

    /** Every {@code struct ...Args { ... };} in {@code source}: the argument structs the host packs. */
    public static List<ArgStruct> structs(String source) {
        String text = stripComments(source);
        List<ArgStruct> out = new ArrayList<>();
        Matcher m = STRUCT.matcher(text);
        while (m.find()) {
            List<ArgStruct.Field> fields = new ArrayList<>();
            for (String decl : m.group(2).split(";")) {
                if (decl.isBlank()) {
                    continue;
                }
                for (String part : splitFieldList(decl)) {
                    fields.add(field(m.group(1), part));
                }
            }
            out.add(new ArgStruct(m.group(1), fields));
        }
        return out;
    }

    /** {@code uint a, b} declares two fields of one type. */
    private static List<String> splitFieldList(String decl) {
        String[] names = decl.trim().split("\\s*,\\s*");
        if (names.length == 1) {
            return List.of(decl);
        }
        String type = names[0].trim().split("\\s+")[0];
        List<String> out = new ArrayList<>();
        out.add(names[0]);
        for (int i = 1; i < names.length; i++) {
            out.add(type + " " + names[i]);
        }
        return out;
    }

    private static ArgStruct.Field field(String struct, String decl) {
        Matcher f = FIELD.matcher(decl);
        if (!f.matches()) {
            throw new IllegalArgumentException("struct " + struct + ": cannot read field '" + decl.trim() + "'");
        }
        return new ArgStruct.Field(f.group(1), f.group(2));
    }

    private static KernelParam param(String kernel, String text) {
        Matcher p = PARAM.matcher(text);
        if (!p.matches()) {
            throw new IllegalArgumentException("kernel " + kernel + ": parameter '" + text.trim()
                    + "' has no [[buffer(i)]], TG_MEM(i) or builtin attribute");
        }
        String type = p.group(1).replaceAll("\\s+", " ");
        String name = p.group(2);
        KernelParam.Binding binding;
        if (p.group(5) != null) {
            binding = new KernelParam.ThreadgroupMemory(Integer.parseInt(p.group(5)));
        } else if (p.group(3).equals("buffer")) {
            if (p.group(4) == null) {
                throw new IllegalArgumentException(
                        "kernel " + kernel + ": parameter " + name + " has [[buffer]] without an index");
            }
            binding = new KernelParam.Buffer(Integer.parseInt(p.group(4)));
        } else {
            binding = new KernelParam.Builtin(p.group(3));
        }
        return new KernelParam(type, name, binding);
    }

    private static List<String> splitTopLevel(String params) {
        List<String> out = new ArrayList<>();
        int depth = 0;
        int start = 0;
        for (int i = 0; i < params.length(); i++) {
            char c = params.charAt(i);
            if (c == '(' || c == '[') {
                depth++;
            } else if (c == ')' || c == ']') {
                depth--;
            } else if (c == ',' && depth == 0) {
                out.add(params.substring(start, i));
                start = i + 1;
            }
        }
        if (!params.isBlank()) {
            out.add(params.substring(start));
        }
        return out;
    }

    private static String stripComments(String s) {
        return s.replaceAll("(?s)/\\*.*?\\*/", " ").replaceAll("//[^\n]*", "");
    }
}
